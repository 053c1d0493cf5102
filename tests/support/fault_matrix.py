"""Writes ``docs/reliability.md``'s fault matrix from the suite's own results.

Tests that inject a fault carry ``@pytest.mark.fault(point, action, outcome)``; with
``--fault-matrix PATH`` the run writes one row per fault and database with the outcome the test
asserted and whether it passed. Nothing in the table is written by hand.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

BEGIN = "<!-- fault-matrix:begin (written by the suite) -->\n"
END = "<!-- fault-matrix:end -->\n"
HEADER = """## The fault matrix

Produced by the test suite (`scripts/test --fault-matrix=docs/reliability.md`): every fault
point the tests inject, on each database, with the outcome the test asserts. A row reads
"passed" only when that test passed in the run that wrote this file. Only the text between
the two markers is rewritten; the rest of the file is written by hand.

| fault point | action | outcome asserted | test | sqlite | postgres |
| --- | --- | --- | --- | --- | --- |
"""


def replace_matrix(document: str, matrix: str) -> str:
    """``document`` with its marked matrix region replaced (appended when it has none)."""
    start, end = document.find(BEGIN), document.find(END)
    if start == -1 or end < start:
        return document.rstrip("\n") + "\n\n" + BEGIN + matrix + END
    return document[: start + len(BEGIN)] + matrix + document[end:]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--fault-matrix", default=None, help="write the fault matrix to this file")


class FaultMatrix:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.rows: dict[tuple[str, str, str, str], dict[str, str]] = defaultdict(dict)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: Any) -> Any:
        outcome = yield
        report = outcome.get_result()
        if report.when != "call" and not (report.when == "setup" and report.failed):
            return
        database = "postgres" if "[postgres" in item.nodeid else "sqlite"
        for mark in item.iter_markers("fault"):
            point, action, asserted = mark.args
            key = (point, action, asserted, item.originalname)
            self.rows[key][database] = "passed" if report.passed else report.outcome

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        lines = [HEADER]
        for (point, action, asserted, test), results in sorted(self.rows.items()):
            lines.append(
                f"| `{point}` | {action} | {asserted} | `{test}` | "
                f"{results.get('sqlite', '-')} | {results.get('postgres', '-')} |\n"
            )
        document = self.path.read_text() if self.path.exists() else ""
        self.path.write_text(replace_matrix(document, "".join(lines)))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "fault(point, action, outcome): a fault-matrix row")
    path = config.getoption("--fault-matrix")
    if path:
        config.pluginmanager.register(FaultMatrix(Path(path)), "kandev-fault-matrix")
