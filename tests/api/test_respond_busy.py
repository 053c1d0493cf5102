"""A response whose claim cannot finish in time (a saturated database) is refused as 503
``busy`` with ``retryable: true``, whichever side of its commit the bound fell on, and the
question is answerable again: the same answer, sent again, is delivered once."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import select

from backend.clarifications import claims
from backend.clarifications.respond import Responder
from backend.db.engine import read_tx
from backend.db.tables import messages
from tests.support.http import answer_all, bundles, detached_bundle, respond
from tests.support.live import LiveApi


async def _intents(live: LiveApi, pending_id: str) -> list[object]:
    async with read_tx(live.runtime.engine) as conn:
        rows = await conn.execute(
            select(messages.c.metadata).where(messages.c.type == "clarification_request")
        )
        return [m.get("delivery_intent") for m in rows.scalars() if m["pending_id"] == pending_id]


async def _refused_then_delivered(live: LiveApi, session: str, bundle: dict) -> None:
    status, body = await respond(live, bundle["pending_id"], answer_all(bundle))
    assert status == 503, body
    assert (body["error"], body["retryable"]) == ("busy", True)
    assert "Traceback" not in str(body)
    (again,) = await bundles(live, session)
    assert (again["pending_id"], again["state"]) == (bundle["pending_id"], "active_detached")
    assert await _intents(live, bundle["pending_id"]) == [None]


@pytest.mark.parametrize("where", ["before_commit", "after_commit"])
async def test_a_claim_that_runs_out_of_time_is_refused_as_busy_and_can_be_sent_again(
    live: LiveApi, monkeypatch: pytest.MonkeyPatch, where: str
):
    _task, session, bundle = await detached_bundle(live, "/ask Deploy? | yes | no")
    responder = live.runtime.responder
    responder.claim_bound_s = 0.3
    if where == "before_commit":
        real_claim = claims.claim

        async def slow_claim(*args, **kwargs):  # inside the claiming transaction
            claimed = await real_claim(*args, **kwargs)
            await asyncio.sleep(2)
            return claimed

        monkeypatch.setattr(claims, "claim", slow_claim)
    else:
        real = Responder._claim

        async def committed_then_slow(self, *args, **kwargs):
            made = await real(self, *args, **kwargs)  # committed
            await asyncio.sleep(2)
            return made

        monkeypatch.setattr(Responder, "_claim", committed_then_slow)

    await _refused_then_delivered(live, session, bundle)

    monkeypatch.undo()
    responder.claim_bound_s = 10.0
    status, body = await respond(live, bundle["pending_id"], answer_all(bundle))
    assert (status, body["outcome"]) == (200, "resumed")
    assert len(await live.dispatched(session)) == 2  # the question's prompt and one resume
