"""Writes ``docs/scenarios.md``: which tests cover each spec scenario S01-S45, from the run itself.

Tests that cover a scenario of the spec (``active-clarification-lifecycle.md``) carry
``@pytest.mark.scenario("Sxx")``. With ``--scenario-report [PATH]`` the run writes one row per
scenario: its title from the spec, the levels (``tests/<level>/``) and tests that cover it and how
each test fared. A scenario counts as covered only when one of its tests *passed*, so a gap cannot
hide behind a skipped PostgreSQL half or a browser test without Chromium; any uncovered scenario
fails the session. Under ``--collect-only`` nothing runs, coverage is by collection, and the report
says so. Nothing in the table is written by hand.

Marker ids are checked on every run, with or without the option: a typo such as ``S5`` or
``S46`` would otherwise silently leave a scenario uncovered.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

SCENARIO_IDS: tuple[str, ...] = tuple(f"S{n:02d}" for n in range(1, 46))
_KNOWN_IDS = frozenset(SCENARIO_IDS)
#: Test levels in the order the report lists them; a level is the directory under ``tests/``.
LEVELS: tuple[str, ...] = ("unit", "integration", "api", "acp", "recovery", "e2e")
#: The spec is shared between checkouts and lives beside this one, not in it.
SPEC_FROM_ROOT = Path("..") / "shared" / "spec" / "active-clarification-lifecycle.md"
TITLE_WIDTH = 80
MARKER = "scenario(id): the spec scenario (S01-S45) this test covers"

_SPEC_ENTRY = re.compile(r"^\s*[-*]\s+\*\*(S\d+)\*\*\s*(.*)$")
_HEADING = re.compile(r"^(#+)\s+(.*?)\s*$")


class _DefaultReportPath(str):
    """The path used when ``--scenario-report`` has no value.

    A distinct type so that the default can be resolved against the checkout (``docs/`` is
    there) while a path the user typed keeps meaning "relative to where I ran pytest".
    """


DEFAULT_REPORT = _DefaultReportPath("docs/scenarios.md")
_BAD_MARKERS = pytest.StashKey[bool]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kandev-scenarios", "spec scenario coverage")
    group.addoption(
        "--scenario-report",
        nargs="?",
        const=DEFAULT_REPORT,
        default=None,
        metavar="PATH",
        help=(
            "write the S01-S45 scenario coverage table to PATH (a .md file; default "
            f"{DEFAULT_REPORT}) and fail if a scenario has no passing (or, with "
            "--collect-only, no collected) test"
        ),
    )
    group.addoption(
        "--scenario-spec",
        default=None,
        metavar="PATH",
        help=f"the spec the scenario titles are read from (default <rootdir>/{SPEC_FROM_ROOT})",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Register the marker and, only when ``--scenario-report`` is given, the report.

    The marker is registered here as well so that ``--strict-markers`` holds outside this
    project's pyproject (e.g. under ``pytester``); a run without the option only checks ids.
    """
    if not any(line.startswith("scenario(") for line in config.getini("markers")):
        config.addinivalue_line("markers", MARKER)
    value = config.getoption("--scenario-report")
    if value is None:
        return
    if not str(value).endswith(".md"):
        # With an optional value, ``--scenario-report tests/unit`` would swallow the test path.
        raise pytest.UsageError(
            f"--scenario-report takes a .md file, got {value!r}: put test paths before the "
            "option or write --scenario-report=PATH"
        )
    base = (
        config.rootpath if isinstance(value, _DefaultReportPath) else config.invocation_params.dir
    )
    spec = config.getoption("--scenario-spec")
    spec_path = config.invocation_params.dir / spec if spec else (config.rootpath / SPEC_FROM_ROOT)
    report = ScenarioReport(base / value, spec_path.resolve(), ran=not config.option.collectonly)
    config.pluginmanager.register(report, "kandev-scenario-report")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Fail collection on a malformed scenario marker, before ``-k``/``-m`` deselect anything."""
    problems = [f"{item.nodeid}: {problem}" for item in items for problem in _marker_problems(item)]
    if problems:
        # pytest still calls pytest_collection_finish after this error; the report skips it.
        config.stash[_BAD_MARKERS] = True
        raise pytest.UsageError(
            "bad scenario marker (expected @pytest.mark.scenario('S01') .. ('S45')):\n  "
            + "\n  ".join(problems)
        )


def _marker_problems(item: pytest.Item) -> Iterator[str]:
    for mark in item.iter_markers("scenario"):
        args = mark.args
        if mark.kwargs or len(args) != 1 or not isinstance(args[0], str):
            yield f"scenario marker takes one id, got args={args!r} kwargs={mark.kwargs!r}"
        elif args[0] not in _KNOWN_IDS:
            yield f"unknown scenario id {args[0]!r}"


def scenarios_of(item: pytest.Item) -> set[str]:
    """The scenario ids an item's markers name (function, class and module markers together)."""
    return {mark.args[0] for mark in item.iter_markers("scenario")}


def parse_spec_titles(text: str) -> dict[str, str]:
    """Each ``- **Sxx** GIVEN ... WHEN ... THEN ...`` entry of the spec's Scenarios section.

    Entries may wrap over several lines; the bold markup is dropped and the whitespace folded,
    so that the title is one line of text. Without a Scenarios heading the whole text is read.
    """
    lines = text.splitlines()
    for index, line in enumerate(lines):
        heading = _HEADING.match(line)
        if heading and heading.group(2).lower() == "scenarios":
            depth = len(heading.group(1))
            section: list[str] = []
            for rest in lines[index + 1 :]:
                following = _HEADING.match(rest)
                if following and len(following.group(1)) <= depth:
                    break
                section.append(rest)
            lines = section
            break
    entries: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in lines:
        entry = _SPEC_ENTRY.match(line)
        if entry:
            current = entries.setdefault(entry.group(1), [])
            current.append(entry.group(2))
        elif current is not None and line.strip() and not re.match(r"^\s*([-*]\s|#)", line):
            current.append(line.strip())
        else:
            current = None
    return {
        sid: " ".join(" ".join(parts).replace("**", "").split()) for sid, parts in entries.items()
    }


def shorten_title(text: str, width: int = TITLE_WIDTH) -> str:
    """``text`` cut at a word boundary to at most ``width`` characters, with an ellipsis.

    A cut inside inline code would leave an unmatched backtick that breaks the table cell, so
    the cut moves before it.
    """
    if len(text) <= width:
        return text
    cut = text[: width - 1]
    if " " in cut:
        cut = cut[: cut.rindex(" ")]
    if cut.count("`") % 2:
        cut = cut[: cut.rindex("`")]
    return cut.rstrip(" ,;:") + "…"


def level_of(path: Path, rootpath: Path) -> str:
    """The directory under ``tests/`` a test file is in (``unit``, ``api``, ...)."""
    try:
        parts = path.relative_to(rootpath).parts[:-1]
    except ValueError:
        parts = path.parts[-2:-1]
    if parts and parts[0] == "tests":
        parts = parts[1:]
    return parts[0] if parts else "tests"


@dataclass(frozen=True)
class CoveringTest:
    nodeid: str
    #: The node id without its parametrization: parametrized variants are one test.
    base: str
    param: str | None
    level: str


class ScenarioReport:
    """Collects covering tests and their outcomes; writes the table when the session ends."""

    def __init__(self, path: Path, spec_path: Path, *, ran: bool) -> None:
        self.path = path
        self.spec_path = spec_path
        #: False under --collect-only: coverage is then by collection alone.
        self.ran = ran
        self.covering: dict[str, list[CoveringTest]] = defaultdict(list)
        self.outcomes: dict[str, str] = {}
        self.collected = False
        self.uncovered: dict[str, str] = {}

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if session.config.stash.get(_BAD_MARKERS, False):
            return
        rootpath = session.config.rootpath
        for item in session.items:
            ids = scenarios_of(item)
            if not ids:
                continue
            name = getattr(item, "originalname", item.name)
            callspec = getattr(item, "callspec", None)
            test = CoveringTest(
                nodeid=item.nodeid,
                base=item.nodeid[: len(item.nodeid) - len(item.name)] + name,
                param=callspec.id if callspec is not None else None,
                level=level_of(item.path, rootpath),
            )
            for sid in ids:
                self.covering[sid].append(test)
        self.collected = True

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.outcomes.get(report.nodeid) == "failed":
            return  # a failed setup, call or teardown is the test's outcome
        if report.failed:
            outcome = "failed"
        elif report.skipped:
            outcome = "xfailed" if hasattr(report, "wasxfail") else "skipped"
        elif report.when == "call":
            outcome = "xpassed" if hasattr(report, "wasxfail") else "passed"
        else:
            return
        self.outcomes[report.nodeid] = outcome

    def status(self, sid: str) -> tuple[bool, str]:
        """Whether ``sid`` is covered, and the reason in a few words."""
        tests = self.covering.get(sid, [])
        if not tests:
            return False, "no test"
        if not self.ran:
            return True, "collected"
        outcomes = {self.outcomes.get(test.nodeid, "not run") for test in tests}
        if "passed" in outcomes:
            return True, "passed"
        return False, "no passing test: " + ", ".join(sorted(outcomes))

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if not self.collected:
            return  # collection failed: a table of it would claim gaps that are not there
        self.uncovered = {}
        for sid in SCENARIO_IDS:
            covered, reason = self.status(sid)
            if not covered:
                self.uncovered[sid] = reason
        self.path.write_text(self.render(), encoding="utf-8")
        if self.uncovered and session.exitstatus in (
            pytest.ExitCode.OK,
            pytest.ExitCode.NO_TESTS_COLLECTED,
        ):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        terminalreporter.section("scenario report")
        if not self.collected:
            terminalreporter.write_line("scenarios: not reported (collection did not finish)")
            return
        covered = len(SCENARIO_IDS) - len(self.uncovered)
        how = "tests run" if self.ran else "by collection; tests were not run"
        terminalreporter.write_line(
            f"scenarios: {covered}/{len(SCENARIO_IDS)} covered ({how})",
            green=not self.uncovered,
            red=bool(self.uncovered),
        )
        if self.uncovered:
            missing = ", ".join(f"{sid} ({why})" for sid, why in self.uncovered.items())
            terminalreporter.write_line(f"missing: {missing}", red=True)
        terminalreporter.write_line(f"report written to {self.path}")

    def render(self) -> str:
        titles = self._titles()
        covered = len(SCENARIO_IDS) - len(self.uncovered)
        how = (
            "a scenario counts when one of its tests passed in this run"
            if self.ran
            else "by collection only: `--collect-only` did not run the tests"
        )
        lines = [
            "# Spec scenarios: test coverage\n\n",
            "Produced by the test suite (`scripts/test --scenario-report`, default path\n",
            "`docs/scenarios.md`): each scenario of the spec with the tests marked\n",
            '`@pytest.mark.scenario("Sxx")`, their level (the directory under `tests/`) and,\n',
            "when the tests ran, each test's outcome. A scenario whose tests were only skipped\n",
            "or failed is not covered. Nothing in the table is written by hand.\n\n",
            f"**{covered}/{len(SCENARIO_IDS)} covered**: {how}.",
        ]
        if self.uncovered:
            lines.append(f" Not covered: {', '.join(self.uncovered)}.")
        lines.append("\n\n")
        if not titles:
            lines.append(f"Titles: the spec was not found at `{self.spec_path}`; ids only.\n\n")
        lines.append("| scenario | title | covered | levels | tests | covering tests |\n")
        lines.append("| --- | --- | --- | --- | --- | --- |\n")
        for sid in SCENARIO_IDS:
            tests = sorted(self.covering.get(sid, []), key=_test_order)
            covered_here, reason = self.status(sid)
            levels = sorted({test.level for test in tests}, key=_level_order)
            cells = [
                sid,
                _cell(shorten_title(titles[sid])) if sid in titles else "",
                "yes" if covered_here else f"**NO** ({reason})",
                ", ".join(levels),
                str(len({test.base for test in tests})),
                self._render_tests(tests),
            ]
            lines.append("| " + " | ".join(cells) + " |\n")
        return "".join(lines)

    def _titles(self) -> dict[str, str]:
        try:
            return parse_spec_titles(self.spec_path.read_text(encoding="utf-8"))
        except OSError:
            return {}

    def _render_tests(self, tests: list[CoveringTest]) -> str:
        """One entry per test, its parametrized variants folded: ``base[sqlite, postgres]``."""
        variants: dict[str, list[CoveringTest]] = {}
        for test in tests:
            variants.setdefault(test.base, []).append(test)
        entries = []
        for base, group in variants.items():
            params = [test.param for test in group if test.param is not None]
            if not self.ran:
                entries.append(f"`{base}[{', '.join(params)}]`" if params else f"`{base}`")
                continue
            outcomes = [self.outcomes.get(test.nodeid, "not run") for test in group]
            if len(set(outcomes)) == 1:
                name = f"`{base}[{', '.join(params)}]`" if params else f"`{base}`"
                entries.append(f"{name} {outcomes[0]}")
            else:
                detail = ", ".join(
                    f"{test.param}: {outcome}"
                    for test, outcome in zip(group, outcomes, strict=True)
                )
                entries.append(f"`{base}` ({detail})")
        return "<br>".join(_cell(entry) for entry in entries)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _level_order(level: str) -> tuple[int, str]:
    return (LEVELS.index(level) if level in LEVELS else len(LEVELS), level)


def _test_order(test: CoveringTest) -> tuple[tuple[int, str], str]:
    return (_level_order(test.level), test.base)
