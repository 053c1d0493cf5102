"""Bad-input fuzzing of every public operation in ``/api/v1/openapi.json``.

For each operation, hypothesis draws requests whose path parameters are real ids from a scene
(tasks, sessions, a clarification message, its pending id, workflow, steps) or odd strings
(unicode, very long, NUL, traversal, percent signs, lone surrogates), and whose bodies are
either drawn from the operation's own request schema (hypothesis-jsonschema, ids sometimes
swapped for real ones, sometimes mutated with unknown fields, wrong types or >16 KiB strings)
or junk: arbitrary JSON, non-JSON bytes, empty bodies and wrong content types. Every response
must be below 500, carry no stack trace, and on 4xx be a JSON ``{"error", ...}`` object; a 4xx
must write nothing (every table is dumped before and after, whenever the database was quiet
before the request, which is most of the time).

The WebSocket route (``/api/v1/events``) is not in the OpenAPI document and is not fuzzed
here; the internal ``/_test`` and ``/_agent`` routes are skipped (see ``INTERNAL_PREFIXES``).

Generation is derandomized (a fixed seed per operation), so CI sends the same requests every
run; only the scene's ids differ. To explore further, raise the number of examples per
operation and/or pick another seed::

    KANDEV_FUZZ_EXAMPLES=500 KANDEV_FUZZ_SEED=7 .venv/bin/python -m pytest tests/api/test_fuzz.py

The default (40 per operation, about 700 requests) keeps the file around 20-30 s per database.
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import zlib
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema
from sqlalchemy import select

from backend.db.engine import read_tx
from backend.db.tables import sessions
from backend.vocabulary import SessionState
from tests.support.http import detached_bundle, dump, idle, messages, start_session
from tests.support.live import LiveApi

EXAMPLES = int(os.environ.get("KANDEV_FUZZ_EXAMPLES", "40"))
SEED = int(os.environ.get("KANDEV_FUZZ_SEED", "0"))

#: ``/_test`` (fault points; only mounted in test builds) and ``/_agent`` (callbacks from the
#: agent executor, not a client surface) are internal. They are left out of the schema anyway,
#: and fuzzing them would arm crash fault points or forge agent turns: that is sabotage by a
#: trusted party, not bad input from a client.
INTERNAL_PREFIXES = ("/api/v1/_test/", "/api/v1/_agent/")

#: Operations that remove a scene task with everything of it: sent after all the others.
SCENE_DESTROYING = frozenset({"DELETE /api/v1/tasks/{task_id}"})

JSON = "application/json"
ABSENT = object()
BUSY = {SessionState.CREATED, SessionState.STARTING, SessionState.RUNNING}

ODD_STRINGS = [
    "",
    " ",
    "0",
    "-1",
    "1e309",
    "null",
    "None",
    "undefined",
    "true",
    "[]",
    "{}",
    ".",
    "..",
    "%",
    "%00",
    "%2F",
    "\x00",
    "a\x00b",
    "\n",
    "\t",
    "\r\n",
    "' OR '1'='1",
    '"; DROP TABLE tasks; --',
    "../../etc/passwd",
    "\\",
    "\u202e",
    "\ufeff",
    "\ud800",
    "\udfff",
    "\U0001d54f",
    "😀" * 10,
    "é",
    "a" * 64,
    "a" * 65,
    "a" * 300,
    "a" * 2000,
    "COMPLETED",
    "mock",
]

RAW_BODIES = [
    b"",
    b" ",
    b"{",
    b"}",
    b"[",
    b'{"',
    b'{"title": "x"',
    b"null",
    b"true",
    b"0",
    b"-0",
    b"[]",
    b'""',
    b"{}",
    b"NaN",
    b"Infinity",
    b'{"title": NaN, "prompt": Infinity, "content": -Infinity}',
    b'{"rejected": NaN}',
    b"1e999999",
    b'{"prompt_generation": 1e999999}',
    b"9" * 5000,
    b"\xff\xfe\x00\x00",
    b"\xef\xbb\xbf{}",
    b'{"a": 1, "a": 2}',
    b'{"title": "a", "title": "b"}',
    b"[" * 5000 + b"]" * 5000,
    b'{"x":' * 3000 + b"1" + b"}" * 3000,
    b'{"answers": [' + b"[" * 3000 + b"]" * 3000 + b"]}",
    b"\x00",
    b'{"title": "\\ud800", "prompt": "\\udfff", "content": "\\ud800"}',
    b'{"title": "\xed\xa0\x80", "prompt": "\xed\xa0\x80", "content": "\xc3\x28"}',
    b'{"title": "\\u0000", "prompt": "\\u0000", "content": "\\u0000", "state": "\\u0000"}',
    b'{"workflow_step_id": "\\u0000"}',
    b'{"answers": [{"message_id": "\\u0000", "option_ids": ["\\u0000"]}]}',
    b"title=x&prompt=y",
    b"--x\r\nContent-Disposition: form-data; name=title\r\n\r\nx\r\n--x--\r\n",
    b"<xml/>",
]

CONTENT_TYPES = [
    "text/plain",
    "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=x",
    "multipart/form-data",
    "application/xml",
    "application/json; charset=latin-1",
    "application/json; charset=utf-16",
    "application/vnd.api+json",
    "application/jsonx",
    "json",
    "",
    None,
]

AUTH_HEADERS = [
    "Bearer nope",
    "Bearer",
    "Basic abc",
    "bearer nope",
    "Bearer " + "a" * 4000,
    "Bearer a b c",
    "Bearer \u00e9",  # sent as Latin-1 bytes
    "Token x",
]

#: Sizes around the schema limits (64-char ids, 200-char titles, 16 KiB text, 64 KiB prompts).
HUGE_SIZES = [64, 65, 200, 201, 16 * 1024, 16 * 1024 + 1, 64 * 1024, 64 * 1024 + 1, 100_000]


@dataclass
class Req:
    op: str
    kind: str  # "junk" (expected refused) or "schema" (drawn from the request schema)
    method: str
    path: str  # already percent-encoded
    params: list[tuple[str, str]] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)
    content: bytes | None = None

    def describe(self) -> str:
        body = "<none>" if self.content is None else f"{len(self.content)} bytes "
        if self.content is not None:
            body += repr(self.content[:400]) + ("..." if len(self.content) > 400 else "")
        params = f" params={self.params!r}" if self.params else ""
        headers = f" headers={self.headers!r}" if self.headers else ""
        return f"{self.method} {self.path}{params}{headers} body={body}"


# -- the scene ------------------------------------------------------------------------------


async def scene(live: LiveApi) -> dict[str, list[str]]:
    """A task whose session has a detached question, and a task with an idle session."""
    task, session, bundle = await detached_bundle(live, "/ask Fuzz? | yes | no\n/ask Why?")
    other_task, other_session = await start_session(live, "hello")
    await idle(live, other_task, other_session)
    snapshot = (await live.http.get(f"/api/v1/tasks/{task}")).json()
    steps = (await live.http.get(f"/api/v1/workflows/{snapshot['workflow_id']}/snapshot")).json()
    msgs = await messages(live, session) + await messages(live, other_session)
    return {
        "task_id": [task, other_task],
        "session_id": [session, other_session],
        "message_id": [m["id"] for m in msgs],
        "pending_id": [bundle["pending_id"]],
        "workflow_id": [snapshot["workflow_id"]],
        "workspace_id": [snapshot["workspace_id"]],
        "workflow_step_id": [s["id"] for s in steps["steps"]],
        "turn_id": sorted({m["turn_id"] for m in msgs if m["turn_id"]}),
        "option_ids": [o["id"] for q in bundle["questions"] for o in q["options"]],
    }


# -- request generation ---------------------------------------------------------------------


def inline_refs(node: Any, components: dict[str, Any], depth: int = 0) -> Any:
    """``node`` with every ``#/components/schemas/X`` reference replaced by ``X`` itself."""
    assert depth < 20, "recursive schema"
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/components/schemas/"):
            target = components[ref.rsplit("/", 1)[1]]
            return inline_refs(copy.deepcopy(target), components, depth + 1)
        return {k: inline_refs(v, components, depth) for k, v in node.items()}
    if isinstance(node, list):
        return [inline_refs(v, components, depth) for v in node]
    return node


@dataclass
class Operation:
    method: str
    path: str
    path_params: list[str]
    query_params: list[str]
    body_schema: dict[str, Any] | None

    @property
    def name(self) -> str:
        return f"{self.method} {self.path}"


def operations(doc: dict[str, Any]) -> list[Operation]:
    components = doc.get("components", {}).get("schemas", {})
    found = []
    for path, item in doc["paths"].items():
        if path.startswith(INTERNAL_PREFIXES):
            continue
        for method, op in item.items():
            if method not in {"get", "post", "put", "patch", "delete"}:
                continue
            params = op.get("parameters", [])
            schema = op.get("requestBody", {}).get("content", {}).get(JSON, {}).get("schema")
            found.append(
                Operation(
                    method=method.upper(),
                    path=path,
                    path_params=[p["name"] for p in params if p["in"] == "path"],
                    query_params=[p["name"] for p in params if p["in"] == "query"],
                    body_schema=inline_refs(schema, components) if schema else None,
                )
            )
    return found


def schema_values(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values valid for ``schema``. Leaves come from hypothesis-jsonschema; objects, arrays
    and unions are assembled here, because its object strategy relies on Hypothesis
    internals that the pinned Hypothesis no longer has (``'many' object has no attribute
    'more'``)."""
    if "anyOf" in schema:
        return st.one_of([schema_values(s) for s in schema["anyOf"]])
    if schema.get("type") == "object" and "properties" in schema:
        required = set(schema.get("required", []))
        members = {
            key: schema_values(sub) if key in required else st.just(ABSENT) | schema_values(sub)
            for key, sub in schema["properties"].items()
        }
        return st.fixed_dictionaries(members).map(
            lambda d: {k: v for k, v in d.items() if v is not ABSENT}
        )
    if schema.get("type") == "array" and isinstance(schema.get("items"), dict):
        return st.lists(
            schema_values(schema["items"]),
            min_size=schema.get("minItems", 0),
            max_size=min(schema.get("maxItems", 5), 5),
        )
    return from_schema(schema)


def encode(value: str) -> str:
    return quote(value.encode("utf-8", "surrogatepass"), safe="")


def huge_strings() -> st.SearchStrategy[str]:
    return st.builds(
        lambda char, n: char * n,
        st.sampled_from(["x", "é", "😀", "\x00", " ", "\\"]),
        st.sampled_from(HUGE_SIZES) | st.integers(16 * 1024 + 1, 80 * 1024),
    )


def odd_strings() -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from(ODD_STRINGS),
        st.text(max_size=40),
        st.text(st.characters(codec="utf-8"), min_size=65, max_size=600),
    )


def junk_json(keys: list[str]) -> st.SearchStrategy[Any]:
    """Arbitrary JSON, with the schema's own field names among the keys (so types are wrong)."""
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.integers(min_value=2**63),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=30),
        st.sampled_from(ODD_STRINGS),
    )
    names = st.sampled_from(keys) | st.text(max_size=12) if keys else st.text(max_size=12)
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(names, inner, max_size=4),
        max_leaves=12,
    )


def field_names(schema: dict[str, Any] | None) -> list[str]:
    if not schema:
        return ["title", "prompt", "content", "state", "answers", "rejected"]
    names: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            names.update(node.get("properties", {}))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema)
    return sorted(names)


def realify(data: st.DataObject, value: Any, ids: dict[str, list[str]], key: str = "") -> Any:
    """Swap some values of a schema-drawn body for real ids of the scene (by field name), and
    some strings for odd ones (NUL, lone surrogates, traversal...)."""
    if isinstance(value, dict):
        return {k: realify(data, v, ids, k) for k, v in value.items()}
    if isinstance(value, list):
        return [realify(data, v, ids, key) for v in value]
    if isinstance(value, str):
        choice = data.draw(st.integers(0, 5))
        if choice <= 2 and ids.get(key):
            return data.draw(st.sampled_from(ids[key]))
        if choice == 5:
            return data.draw(st.sampled_from(ODD_STRINGS))
    return value


def draw_body(
    data: st.DataObject, op: Operation, ids: dict[str, list[str]]
) -> tuple[str, bytes | None, str | None]:
    """``(kind, content, content_type)`` for ``op``."""
    keys = field_names(op.body_schema)
    shapes = ["junk", "raw", "huge", "empty"]
    if op.body_schema is not None:
        shapes = ["schema", "schema", "schema", "schema", "mutated", *shapes]
    else:
        shapes = ["none", "none", "none", *shapes]
    shape = data.draw(st.sampled_from(shapes), label="body shape")
    ascii_only = data.draw(st.booleans(), label="ensure_ascii")

    def as_json(value: Any) -> bytes:
        return json.dumps(value, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")

    if shape == "none":
        return "junk", None, None
    if shape == "empty":
        return "junk", b"", data.draw(st.sampled_from([JSON, None]))
    if shape == "raw":
        raw = data.draw(st.sampled_from(RAW_BODIES) | st.binary(max_size=64))
        return "junk", raw, data.draw(st.sampled_from([JSON, JSON, *CONTENT_TYPES]))
    if shape == "junk":
        return "junk", as_json(data.draw(junk_json(keys), label="junk")), JSON
    if shape == "huge":
        body = {data.draw(st.sampled_from(keys)): data.draw(huge_strings())}
        if op.body_schema is not None and data.draw(st.booleans()):
            body = {**data.draw(schema_values(op.body_schema)), **body}
        return "junk", as_json(body), JSON
    body = realify(data, data.draw(schema_values(op.body_schema), label="schema body"), ids)
    if shape == "mutated":
        mutation = data.draw(st.sampled_from(["unknown field", "wrong type", "huge", "not object"]))
        if mutation == "unknown field":
            body[data.draw(st.text(min_size=1, max_size=20).filter(lambda k: k not in keys))] = (
                data.draw(junk_json(keys))
            )
        elif mutation == "wrong type" and keys:
            body[data.draw(st.sampled_from(keys))] = data.draw(junk_json(keys))
        elif mutation == "huge" and keys:
            body[data.draw(st.sampled_from(keys))] = data.draw(huge_strings())
        else:
            body = [body]
        content_type = data.draw(st.sampled_from([JSON, JSON, JSON, *CONTENT_TYPES]))
        return "junk", as_json(body), content_type
    # A schema-shaped body is sometimes sent with a wrong content type: that must be refused.
    content_type = data.draw(st.sampled_from([JSON] * 30 + CONTENT_TYPES))
    return ("schema" if content_type == JSON else "junk"), as_json(body), content_type


def draw_request(data: st.DataObject, op: Operation, ids: dict[str, list[str]]) -> Req:
    everything = sorted({i for pool in ids.values() for i in pool})
    path = op.path
    for name in op.path_params:
        own = st.sampled_from(ids.get(name) or everything)
        value = data.draw(
            st.one_of(own, own, st.sampled_from(everything), odd_strings()), label=name
        )
        path = path.replace("{" + name + "}", encode(value))
    params: list[tuple[str, str]] = []
    for name in op.query_params:
        own = st.sampled_from(ids.get(name) or everything)
        for value in data.draw(st.lists(own | odd_strings(), max_size=2), label=name):
            params.append((name, value.encode("utf-8", "surrogatepass").decode("utf-8", "replace")))
    if data.draw(st.integers(0, 9)) == 0:
        params.append((data.draw(st.sampled_from(ODD_STRINGS[:20])), "x"))
    kind, content, content_type = draw_body(data, op, ids)
    headers: dict[str, str] = {}
    if content_type is not None:
        headers["content-type"] = content_type
    if data.draw(st.integers(0, 9)) == 0:
        headers["authorization"] = data.draw(st.sampled_from(AUTH_HEADERS))
        kind = "junk"
    return Req(op.name, kind, op.method, path, params, headers, content)


def generate(ops: list[Operation], ids: dict[str, list[str]]) -> list[Req]:
    """``EXAMPLES`` requests per operation, drawn by hypothesis (deterministically)."""
    requests: list[Req] = []
    for op in ops:
        collector(op, ids, requests)()
    # Junk first, while the scene is intact; schema-shaped requests may consume it. Deleting
    # a task removes a whole task of the scene at once, so those requests go last.
    return sorted(requests, key=lambda r: (r.op in SCENE_DESTROYING, r.kind != "junk"))


def collector(op: Operation, ids: dict[str, list[str]], into: list[Req]) -> Any:
    """A hypothesis test that only records what it draws: run once, it fills ``into``."""

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @seed(zlib.crc32(op.name.encode()) + SEED)
    @given(st.data())
    def collect(data: st.DataObject) -> None:
        into.append(draw_request(data, op, ids))

    return collect


# -- sending and checking -------------------------------------------------------------------


class Checker:
    """Sends requests and records every breach of the contract, grouped by kind of failure."""

    def __init__(self, live: LiveApi) -> None:
        self.live = live
        self.problems: dict[tuple[str, str, int], list[str]] = {}
        self.baseline: dict[str, list[tuple[Any, ...]]] | None = None
        self.settles = True
        self.statuses: dict[int, int] = {}
        self.write_checks = 0

    def problem(self, what: str, req: Req, status: int, detail: str) -> None:
        self.problems.setdefault((what, req.op, status), []).append(
            f"{req.describe()}\n      -> {status} {detail[:400]!r}"
        )

    def report(self) -> str:
        lines = []
        for (what, op, status), cases in self.problems.items():
            lines.append(f"{what}: {op} -> {status} ({len(cases)} requests), e.g.")
            lines.extend(f"    {case}" for case in cases[:3])
        return "\n".join(lines)

    async def quiet_dump(self, within_s: float = 10.0) -> dict[str, list[tuple[Any, ...]]] | None:
        """A dump taken while nothing is being written (no running turn, no new event, the
        same rows 20 ms apart), or ``None`` when the database does not settle."""
        engine = self.live.runtime.engine
        deadline = asyncio.get_running_loop().time() + within_s
        while asyncio.get_running_loop().time() < deadline:
            seen = len(self.live.events)
            first = await dump(engine)
            async with read_tx(engine) as conn:
                states = {r.state for r in await conn.execute(select(sessions.c.state))}
            await asyncio.sleep(0.02)
            if not states & BUSY and len(self.live.events) == seen and await dump(engine) == first:
                return first
        self.settles = False  # stop waiting; the final write-check count will say so
        return None

    async def send(self, req: Req) -> None:
        if self.baseline is None and self.settles:
            self.baseline = await self.quiet_dump()
        events = len(self.live.events)
        try:
            headers = {k: v.encode("latin-1") for k, v in req.headers.items()}
            response = await self.live.http.request(
                req.method, req.path, params=req.params, headers=headers, content=req.content
            )
        except Exception as error:  # the server dropped the connection or hung
            self.problem("no response", req, 0, repr(error))
            self.baseline = None
            return
        status, text = response.status_code, response.text
        self.statuses[status] = self.statuses.get(status, 0) + 1
        if status >= 500:
            self.problem("server error", req, status, text)
        if "Traceback" in text or 'File "' in text:
            self.problem("stack trace in the response", req, status, text)
        if not 400 <= status < 500:
            # It may have written. A read that published no event started nothing in the
            # background, so the rows as they are now are a good baseline; anything else
            # waits for the database to settle before the next check.
            quiet = req.method == "GET" and len(self.live.events) == events
            self.baseline = await dump(self.live.runtime.engine) if quiet else None
            return
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict) or not isinstance(body.get("error"), str):
            self.problem("4xx without a JSON error", req, status, text)
        if self.baseline is not None:
            after = await dump(self.live.runtime.engine)
            self.write_checks += 1
            if after != self.baseline:
                changed = sorted(t for t in after if after[t] != self.baseline.get(t))
                self.problem(f"4xx wrote to {changed}", req, status, text)
            self.baseline = after


async def test_every_operation_refuses_bad_input_cleanly(live):
    doc = (await live.http.get("/api/v1/openapi.json")).json()
    ops = operations(doc)
    assert len(ops) >= 15, [op.name for op in ops]
    ids = await scene(live)
    requests = generate(ops, ids)
    assert {r.op for r in requests} == {op.name for op in ops}
    checker = Checker(live)
    for req in requests:
        await checker.send(req)
    summary = f"{len(requests)} requests, statuses {sorted(checker.statuses.items())}"
    assert not checker.problems, summary + "\n" + checker.report()
    # The write check really ran, on most refused requests.
    refused = sum(n for status, n in checker.statuses.items() if 400 <= status < 500)
    assert checker.write_checks >= refused // 2, (checker.write_checks, summary)
