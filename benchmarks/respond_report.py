"""What ``benchmarks.respond`` prints and writes: the tables, the statements per answer, and
the profile read per answer.

Kept apart from the load so the figures' definitions sit in one place: latencies are client
side (request sent to response read); throughput is answers over the fire windows' wall time;
costs "per answer" divide a measured window (fire + settle) by the answers in it.
"""

from __future__ import annotations

import os
import re
from collections import Counter

from benchmarks.respond_load import Measured, percentile
from benchmarks.timing import median

_SPACE = re.compile(r"\s+")
_PARAMS = re.compile(r"%\(\w+\)s(::[A-Z ]+)?")
_IN_LIST = re.compile(r"\(\?(, \?)*\)")


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f}"


def _per(result: Measured, value: float) -> float:
    return value / max(1, len(result.latencies))


def results_table(results: list[Measured]) -> str:
    """One row per db x workers x mode x clients, with the bare-driver figures beside."""
    lines = [
        "| db | workers | mode | clients | answers | p50 ms | p99 ms | max ms | answers/s "
        "| bare p50 ms | bare p99 ms | bare answers/s | p50 HTTP/bare | errors |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        lat = r.latencies
        if not lat:
            continue
        raw = r.raw
        bare = ["-", "-", "-", "-"]
        if raw is not None and raw.latencies:
            bare = [
                f"{median(raw.latencies) * 1000:.2f}",
                f"{percentile(raw.latencies, 0.99) * 1000:.2f}",
                f"{len(raw.latencies) / raw.wall_s:.0f}",
                f"{median(lat) / median(raw.latencies):.0f}x",
            ]
            if raw.connections != raw.clients:
                bare[2] += f" ({raw.connections} conns)"
        lines.append(
            f"| {r.db} | {r.workers} | {r.mode} | {r.clients} | {len(lat)} | {_ms(median(lat))} "
            f"| {_ms(percentile(lat, 0.99))} | {_ms(max(lat))} | {len(lat) / r.fire_s:.1f} "
            f"| {' | '.join(bare)} | {len(r.errors)} |"
        )
    return "\n".join(lines)


def cost_table(results: list[Measured]) -> str:
    """CPU, statements and transactions per answer over fire + settle (the answer's whole
    aftermath: confirmation, the agent's reply and end of turn, summary projection)."""
    lines = [
        "| db | workers | mode | clients | server loop CPU ms | server other threads ms "
        "| GC ms | agents ms | postgres ms | client ms | all CPU ms | loops allow /s "
        "| cores allow /s | statements | transactions | events | settle s |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    cores = os.cpu_count() or 1
    for r in results:
        if not r.latencies:
            continue
        cpu = r.cpu_total
        loop_s = _per(r, cpu["server loop"])
        all_s = sum(_per(r, cpu[k]) for k in _ALL_CPU)
        bounds = _rate(min(r.workers, cores), loop_s), _rate(cores, all_s)
        stmts = sum(r.counts.get("statements", Counter()).values())
        commits = sum(r.counts.get("commits", Counter()).values())
        events = sum(r.counts.get("events", Counter()).values())
        gc_s = sum(r.counts.get("gc_seconds", Counter()).values())
        lines.append(
            f"| {r.db} | {r.workers} | {r.mode} | {r.clients} "
            f"| {_ms(_per(r, cpu['server loop']))} | {_ms(_per(r, cpu['server threads']))} "
            f"| {_ms(_per(r, gc_s))} "
            f"| {_ms(_per(r, cpu['agents']))} | {_ms(_per(r, cpu['postgres']))} "
            f"| {_ms(_per(r, cpu['client']))} | {_ms(all_s)} | {bounds[0]} | {bounds[1]} "
            f"| {_per(r, stmts):.1f} | {_per(r, commits):.1f} "
            f"| {_per(r, events):.1f} | {r.settle_s:.1f} |"
        )
    return "\n".join(lines)


#: Every process of the run whose CPU is measured (GC runs on the loop: counted there).
_ALL_CPU = ("server loop", "server threads", "agents", "postgres", "client")


def _rate(cores: int, cpu_s_per_answer: float) -> str:
    """The answers per second ``cores`` busy cores would give at this CPU cost per answer:
    what the machine allows the load generator and server together, whatever the code waits
    on (the server's loops can use one core each, the whole load all the cores)."""
    return f"{cores / cpu_s_per_answer:.0f}" if cpu_s_per_answer > 0 else "-"


def short_sql(sql: str) -> str:
    """A statement's kind, target and the start of its condition, e.g.
    ``SELECT task_sessions.id ... FROM task_sessions WHERE task_sessions.id = ? FOR UPDATE``
    (expanded ``IN`` lists and parameter styles differ between executions; this does not)."""
    text = _SPACE.sub(" ", sql).strip()
    if text.startswith("SELECT"):
        first = text[7:].split(",", 1)[0].split(" FROM ", 1)[0][:50]
        rest = text.rsplit(" FROM ", 1)[1] if " FROM " in text else ""
        source = rest.split(" WHERE ", 1)[0].split(" ")[0] if rest else ""
        where = rest.split(" WHERE ", 1)[1][:45] if " WHERE " in rest else ""
        tail = " FOR UPDATE" if text.endswith("FOR UPDATE") else ""
        shown = f"SELECT {first} ... FROM {source}" + (f" WHERE {where} ..." if where else "")
        return _IN_LIST.sub("(?...)", _PARAMS.sub("?", shown + tail))
    if text.startswith("UPDATE"):
        return _PARAMS.sub("?", text.split("=", 1)[0][:80])
    return _PARAMS.sub("?", text[:60])


def breakdown(result: Measured) -> str:
    """Per place in the server (request task, tasks it spawned, background): transactions,
    statements and events per answer, then every statement's count per answer."""
    n = max(1, len(result.latencies))
    stmts = result.counts.get("statements", Counter())
    commits = result.counts.get("commits", Counter())
    events = result.counts.get("events", Counter())
    places: Counter[str] = Counter()
    shapes: Counter[tuple[str, str]] = Counter()
    for (place, sql), count in stmts.items():
        places[place] += count
        shapes[(place, short_sql(sql))] += count
    out = [
        f"#### {result.db}, {result.mode}, {result.clients} client(s): per answer",
        "",
        "| where (route; spawned = a task it started) | transactions | statements | events |",
        "|---|---:|---:|---:|",
    ]
    for place in sorted(set(places) | {k[0] for k in commits} | {k[0] for k in events}):
        ev = Counter({k[1]: v for k, v in events.items() if k[0] == place})
        shown = ", ".join(f"{t} {c / n:.1f}" for t, c in sorted(ev.items())) or "-"
        out.append(f"| {place} | {commits[(place,)] / n:.1f} | {places[place] / n:.1f} | {shown} |")
    out += ["", "| statements per answer | where | statement |", "|---:|---|---|"]
    for (place, shape), count in sorted(shapes.items(), key=lambda kv: (kv[0][0], -kv[1])):
        if count / n >= 0.05:
            out.append(f"| {count / n:.2f} | {place} | `{shape}` |")
    logs = result.counts.get("logs", Counter())
    if logs:
        shown = ", ".join(f"{k[0]} {k[1]}: {v / n:.1f}" for k, v in logs.most_common())
        out += ["", f"Log records per answer: {shown}"]
    runs, spent = (
        result.counts.get("gc_runs", Counter()),
        result.counts.get("gc_seconds", Counter()),
    )
    if runs:
        shown = ", ".join(
            f"gen {k[0]}: {v / n:.2f} runs, {spent[k] * 1000 / n:.2f} ms"
            for k, v in sorted(runs.items())
        )
        out += ["", f"Cyclic GC per answer (server): {shown}"]
    return "\n".join(out)


# -- the profile ------------------------------------------------------------------------------

LAYERS = (
    ("idle (epoll wait)", ("select.epoll",)),
    ("selectors (epoll; see note)", ("/selectors.py",)),
    ("weakref callbacks (objects freed)", ("/weakref.py", "/_weakrefset.py")),
    ("sqlalchemy", ("/sqlalchemy/",)),
    ("psycopg", ("/psycopg/", "psycopg_binary")),
    ("aiosqlite/sqlite3", ("/aiosqlite/", "sqlite3")),
    ("pydantic", ("/pydantic", "pydantic_core")),
    ("fastapi", ("/fastapi/",)),
    ("starlette", ("/starlette/",)),
    ("uvicorn/h11/httptools", ("/uvicorn/", "/h11/", "httptools")),
    ("mcp sdk", ("/mcp/",)),
    ("anyio", ("/anyio/",)),
    ("asyncio", ("/asyncio/",)),
    ("json", ("/json/", "_json", "orjson")),
    ("logging", ("/logging/",)),
    ("greenlet", ("greenlet",)),
    ("benchmark hooks", ("benchmarks/respond_server",)),
)


def layer(key: str) -> str:
    if "/backend/" in key:
        module = key.split("/backend/", 1)[1].split(":", 1)[0]
        return "backend/" + module.rsplit("/", 1)[0] if "/" in module else "backend/" + module
    for name, needles in LAYERS:
        if any(needle in key for needle in needles):
            return name
    return "other (builtins, stdlib)"


def profile_summary(raw: dict[str, list[float]], answers: int, kind: str, top: int = 25) -> str:
    """Self time by layer and the top functions, in ms per answer and as a share of the loop's
    busy time; for the sampler also the top backend functions by inclusive time (cProfile's
    cumulative times are not shown: they break at SQLAlchemy's greenlet switches)."""
    places = {k[6:]: v[1] for k, v in raw.items() if k.startswith("place:")}
    raw = {k: v for k, v in raw.items() if not k.startswith("place:")}
    by_layer: Counter[str] = Counter()
    for key, (_calls, own, _cum) in raw.items():
        by_layer[layer(key)] += own
    idle = by_layer.pop("idle (epoll wait)", 0.0)
    busy = sum(by_layer.values()) or 1.0
    n = max(1, answers)
    out = [
        f"{kind}: event-loop thread busy {busy * 1000 / n:.1f} ms per answer"
        + (f" (+ {idle * 1000 / n:.1f} ms in epoll wait)" if idle else "")
        + f", {answers} answers.",
    ]
    if places:
        out += ["", "Where (route whose request task ran it; spawned = a task it started):"]
        for name, seconds in sorted(places.items(), key=lambda kv: -kv[1]):
            out.append(f"  {seconds * 1000 / n:7.2f} ms  {seconds / busy:6.1%}  {name}")
    out += ["", "Self time by layer (ms per answer, share of busy):"]
    for name, seconds in by_layer.most_common():
        out.append(f"  {seconds * 1000 / n:7.2f} ms  {seconds / busy:6.1%}  {name}")
    calls = kind != "sampler"
    rows = sorted(
        ((k, v) for k, v in raw.items() if layer(k) != "idle (epoll wait)"),
        key=lambda kv: -kv[1][1],
    )[:top]
    out += ["", f"Top {top} functions by self time (ms per answer, share"]
    out[-1] += ", calls per answer):" if calls else "):"
    for key, (count, own, _cum) in rows:
        extra = f"  {count / n:7.1f}" if calls else ""
        out.append(f"  {own * 1000 / n:7.2f} ms  {own / busy:6.1%}{extra}  {_short_key(key)}")
    if calls:
        return "\n".join(out)
    rows = sorted(raw.items(), key=lambda kv: -kv[1][2])
    mine = [kv for kv in rows if "/backend/" in kv[0]][: top * 2]
    out += ["", f"Top {top * 2} backend functions by inclusive time (ms per answer, share):"]
    for key, (_count, _own, cum) in mine:
        out.append(f"  {cum * 1000 / n:7.2f} ms  {cum / busy:6.1%}  {_short_key(key)}")
    rows = [kv for kv in rows if "/backend/" not in kv[0] and kv[1][2] < 0.95 * busy][:top]
    out += ["", f"Top {top} other functions by inclusive time (ms per answer, share):"]
    for key, (_count, _own, cum) in rows:
        out.append(f"  {cum * 1000 / n:7.2f} ms  {cum / busy:6.1%}  {_short_key(key)}")
    return "\n".join(out)


def _short_key(key: str) -> str:
    for marker in ("/site-packages/", "/lib/python3", "/work/main/"):
        if marker in key:
            key = key.split(marker, 1)[1]
    return key


def markdown(results: list[Measured], notes: list[str], extra: list[str]) -> str:
    """The whole results file."""
    parts = ["# Respond benchmark results", "", *notes, "", results_table(results), ""]
    parts += ["## Cost per answer (fire + settle windows)", "", cost_table(results), ""]
    return "\n".join(parts + extra) + "\n"
