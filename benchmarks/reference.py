"""The spec's pending-action rule recomputed in plain Python over the generated rows.

The benchmarks check the repository's answers against this before they time anything, so it
must not share code with ``backend``: it reads the rule as docs/architecture.md states it (the
newest authoritative turn by ``(started_at, created_at, id)``; a bundle is active iff its single
non-empty turn id is the current turn, some row is pending or has no status, no row has a
``delivery_intent``, and the session is not terminal).
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

from benchmarks.dataset import CLARIFICATION, PERMISSION, TERMINAL, Data, sqlite_time


def _truthy(value: Any) -> bool:
    """The JSON flag forms the product accepts as true (``true``, ``"true"``, ``"1"``, ``1``)."""
    if isinstance(value, bool):
        return value
    return value in ("true", "1") or (isinstance(value, int) and value == 1)


@dataclass
class Expected:
    """What the rule says, per session and per task, for the checks to compare with."""

    session: dict[str, tuple[str | None, str | None]]  # session -> (current turn, action)
    task: dict[str, str | None]


def reference_rule(data: Data) -> Expected:
    """Every session's current turn and pending action, and every task's most urgent action."""
    referenced = {m[3] for m in data.messages}
    newest: dict[str, tuple[int, int, str]] = {}
    for tid, sid, _task, _gen, started, _completed, made, meta_json in data.turns:
        meta = json.loads(meta_json)
        authoritative = (
            not _truthy(meta.get("prompt_dispatch_pending"))
            or _truthy(meta.get("prompt_dispatch_attempted"))
            or tid in referenced
        )
        key = (started, made, tid)
        if authoritative and (sid not in newest or key > newest[sid]):
            newest[sid] = key
    current = {sid: key[2] for sid, key in newest.items()}

    bundles: dict[tuple[str, str, str], list[tuple[str | None, dict[str, Any]]]] = defaultdict(list)
    for m in data.messages:
        if m[4] in (CLARIFICATION, PERMISSION):
            meta = json.loads(m[7])
            if meta.get("pending_id") is not None:
                bundles[(m[1], meta["pending_id"], m[4])].append((m[3], meta))
    state = {s[0]: s[2] for s in data.sessions}
    actions: dict[str, set[str]] = defaultdict(set)
    for (sid, _pid, type_), rows in bundles.items():
        identity = {turn for turn, _ in rows if turn}
        if (
            len(identity) == 1
            and current.get(sid) in identity
            and any(meta.get("status") in (None, "pending") for _, meta in rows)
            and not any(meta.get("delivery_intent") is not None for _, meta in rows)
            and state[sid] not in TERMINAL
        ):
            actions[sid].add(type_)

    def action(sid: str) -> str | None:
        found = actions.get(sid, set())
        return (
            "clarification"
            if CLARIFICATION in found
            else "permission"
            if PERMISSION in found
            else None
        )

    per_session = {s[0]: (current.get(s[0]), action(s[0])) for s in data.sessions}
    per_task: dict[str, str | None] = {}
    for s in data.sessions:
        a, best = per_session[s[0]][1], per_task.get(s[1])
        if best is None or (a == "clarification" and best == "permission"):
            per_task[s[1]] = a
        else:
            per_task.setdefault(s[1], best)
    return Expected(per_session, per_task)


def compare(
    label: str,
    got: dict[str, tuple[str | None, str | None]],
    expected: dict[str, tuple[str | None, str | None]],
    data: Data,
) -> list[str]:
    """Human-readable differences (empty when ``got`` is right)."""
    problems = []
    if len(got) != len(expected):
        problems.append(f"{label}: {len(got)} sessions returned, {len(expected)} expected")
    wrong = [sid for sid in expected if got.get(sid) != expected[sid]]
    if wrong:
        turns_of: dict[str, list[str]] = defaultdict(list)
        wanted = set(wrong[:5])
        for t in data.turns:
            if t[1] in wanted:
                turns_of[t[1]].append(
                    f"{t[0]} started={sqlite_time(t[4])} created={sqlite_time(t[6])} "
                    f"metadata={t[7]}"
                )
        kinds = Counter(
            ("turn" if got.get(s, (None,))[0] != expected[s][0] else "action") for s in wrong
        )
        clarifying = sum(1 for _, a in got.values() if a == "clarification")
        wanted_n = sum(1 for _, a in expected.values() if a == "clarification")
        problems.append(
            f"{label}: {len(wrong)} sessions differ from the reference rule "
            f"(current turn differs: {kinds['turn']}, only the action differs: {kinds['action']}); "
            f"sessions pending clarification: got {clarifying}, expected {wanted_n}"
        )
        for sid in wrong[:5]:
            problems.append(f"  session {sid}: got {got.get(sid)}, expected {expected[sid]}")
            problems.extend(f"    turn {line}" for line in turns_of[sid])
    return problems


def generator_disagreements(data: Data, expected: Expected) -> list[str]:
    """Sessions whose reference action is not what the generator meant: a generator bug (or a
    reference bug), found before any database is involved."""
    return [s for s, (_, a) in expected.session.items() if a != data.intended[s]]
