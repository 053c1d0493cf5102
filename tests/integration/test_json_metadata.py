"""JSON metadata reads on a real database, through one engine's statement cache."""

from __future__ import annotations

from sqlalchemy import select, update

from backend.db.engine import read_tx, write_tx
from backend.db.json import json_flag, json_merge, json_text
from backend.db.tables import messages
from tests.support.builders import World


async def test_statements_differing_only_in_json_key_do_not_share_a_cache_entry(engine):
    world = World(engine)
    session = await world.session()
    await world.message(session, None, meta={"pending_id": "P", "status": "S", "flag": 0})
    async with read_tx(engine) as conn:
        pending = (
            await conn.execute(select(json_text(messages.c.metadata, "pending_id")))
        ).scalar()
        status = (await conn.execute(select(json_text(messages.c.metadata, "status")))).scalar()
        flag = (await conn.execute(select(json_flag(messages.c.metadata, "flag")))).scalar()
        pending_flag = (
            await conn.execute(select(json_flag(messages.c.metadata, "pending_id")))
        ).scalar()
    assert (pending, status) == ("P", "S")
    assert not flag and not pending_flag


async def test_absent_key_reads_as_null_and_false(engine):
    world = World(engine)
    session = await world.session()
    await world.message(session, None, meta={})
    async with read_tx(engine) as conn:
        text_value = (await conn.execute(select(json_text(messages.c.metadata, "status")))).scalar()
        flag = (await conn.execute(select(json_flag(messages.c.metadata, "status")))).scalar()
    assert text_value is None
    assert not flag


async def test_json_merge_sets_and_removes_keys_in_one_update(engine):
    world = World(engine)
    session = await world.session()
    message = await world.message(
        session, None, meta={"pending_id": "P", "status": "pending", "delivery_intent": {"id": 1}}
    )
    merge_status = json_merge(messages.c.metadata, {"status": "answered", "delivery_intent": None})
    merge_flag = json_merge(messages.c.metadata, {"agent_disconnected": True})
    async with write_tx(engine) as conn:
        await conn.execute(
            update(messages).where(messages.c.id == message).values(metadata=merge_status)
        )
        await conn.execute(
            update(messages).where(messages.c.id == message).values(metadata=merge_flag)
        )
    async with read_tx(engine) as conn:
        meta = (await conn.execute(select(messages.c.metadata))).scalar_one()
    assert meta == {"pending_id": "P", "status": "answered", "agent_disconnected": True}
