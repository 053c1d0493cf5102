"""The scenario report plugin (``tests/support/scenario_report.py``), run on small generated suites.

Each test writes a throwaway suite laid out like ours (``tests/<level>/test_*.py``) and runs pytest
on it in-process with only this plugin loaded, so the table, the terminal summary and the exit
status are checked exactly as ``scripts/test --scenario-report`` produces them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.scenario_report import SCENARIO_IDS, parse_spec_titles, shorten_title

pytest_plugins = ["pytester"]

#: A test per scenario, all passing: the suites below add or remove coverage around it.
ALL_BUT = """
import pytest

EXCEPT = {excluded!r}


@pytest.mark.parametrize(
    "sid",
    [pytest.param(s, marks=pytest.mark.scenario(s)) for s in {ids!r} if s not in EXCEPT],
)
def test_each(sid):
    pass
"""

SPEC = """# A spec

## Behaviour
- **S44** is mentioned here but is not a scenario entry.

## Scenarios
- **S01** **GIVEN** a short one, **WHEN** read, **THEN** it is kept whole.
- **S02** **GIVEN** an entry that wraps over
several lines of the file, **WHEN** the table is written, **THEN** it is one line and cut short
at a word boundary with an ellipsis.
- **S03** **GIVEN** a `pending|action` cell, **WHEN** rendered, **THEN** the pipe is escaped.
## Out of scope
- **S04** is not a scenario either.
"""


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """An empty project whose pytest loads this plugin and no installed ones."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makeini("[pytest]\naddopts = -p tests.support.scenario_report --strict-markers\n")
    return pytester


def write(suite: pytest.Pytester, relative: str, source: str) -> Path:
    path = suite.path / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source)
    return path


def all_but(suite: pytest.Pytester, *excluded: str) -> None:
    write(suite, "tests/unit/test_all.py", ALL_BUT.format(excluded=set(excluded), ids=SCENARIO_IDS))


def report_row(report: Path, sid: str) -> str:
    return next(line for line in report.read_text().splitlines() if line.startswith(f"| {sid} |"))


def test_every_scenario_passing_is_full_coverage(suite: pytest.Pytester) -> None:
    all_but(suite)
    result = suite.runpytest("--scenario-report=out.md")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["scenarios: 45/45 covered (tests run)", "report written to *"])
    report = (suite.path / "out.md").read_text()
    assert "**45/45 covered**: a scenario counts when one of its tests passed" in report
    assert report.count("\n| S") == 45
    assert report_row(suite.path / "out.md", "S07") == (
        "| S07 |  | yes | unit | 1 | `tests/unit/test_all.py::test_each[S07]` passed |"
    )


def test_a_scenario_without_a_test_fails_the_session(suite: pytest.Pytester) -> None:
    all_but(suite, "S07", "S45")
    result = suite.runpytest("--scenario-report=out.md")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        ["scenarios: 43/45 covered (tests run)", "missing: S07 (no test), S45 (no test)"]
    )
    assert "**NO** (no test)" in report_row(suite.path / "out.md", "S07")
    assert "Not covered: S07, S45." in (suite.path / "out.md").read_text()


def test_skipped_or_failed_tests_do_not_cover(suite: pytest.Pytester) -> None:
    all_but(suite, "S07", "S08", "S09")
    write(
        suite,
        "tests/api/test_partial.py",
        """
import pytest

@pytest.mark.scenario("S07")
def test_skipped():
    pytest.skip("no browser")

@pytest.mark.scenario("S08")
def test_fails():
    assert False

@pytest.mark.scenario("S08")
@pytest.mark.xfail(reason="known")
def test_xfails():
    assert False

@pytest.mark.scenario("S09")
def test_skipped_too():
    pytest.skip("no postgres")

@pytest.mark.scenario("S09")
def test_passes():
    pass
""",
    )
    result = suite.runpytest("--scenario-report=out.md")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "scenarios: 43/45 covered (tests run)",
            "missing: S07 (no passing test: skipped), S08 (no passing test: failed, xfailed)",
        ]
    )
    report = suite.path / "out.md"
    assert "`tests/api/test_partial.py::test_skipped` skipped" in report_row(report, "S07")
    assert "| yes | api | 2 |" in report_row(report, "S09")


def test_only_skips_still_fail_a_session_that_otherwise_passed(suite: pytest.Pytester) -> None:
    all_but(suite, "S07")
    write(
        suite,
        "tests/e2e/test_browser.py",
        'import pytest\n\n@pytest.mark.scenario("S07")\ndef test_b():\n    pytest.skip("x")\n',
    )
    result = suite.runpytest("--scenario-report=out.md")
    result.assert_outcomes(passed=44, skipped=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_parametrized_variants_count_once_and_fold_their_ids(suite: pytest.Pytester) -> None:
    all_but(suite, "S01", "S02")
    write(
        suite,
        "tests/integration/test_db.py",
        """
import pytest

@pytest.fixture(params=["sqlite", "postgres"])
def database(request):
    if request.param == "postgres":
        pytest.skip("no server")
    return request.param

@pytest.mark.scenario("S01")
@pytest.mark.scenario("S02")
def test_both(database):
    pass

@pytest.mark.scenario("S02")
@pytest.mark.parametrize("n", [1, 2])
def test_plain(n):
    pass
""",
    )
    write(
        suite,
        "tests/unit/test_more.py",
        'import pytest\n\n@pytest.mark.scenario("S02")\ndef test_unit():\n    pass\n',
    )
    result = suite.runpytest("--scenario-report=out.md")
    assert result.ret == pytest.ExitCode.OK
    report = suite.path / "out.md"
    assert report_row(report, "S01") == (
        "| S01 |  | yes | integration | 1 | "
        "`tests/integration/test_db.py::test_both` (sqlite: passed, postgres: skipped) |"
    )
    assert report_row(report, "S02") == (
        "| S02 |  | yes | unit, integration | 3 | "
        "`tests/unit/test_more.py::test_unit` passed<br>"
        "`tests/integration/test_db.py::test_both` (sqlite: passed, postgres: skipped)<br>"
        "`tests/integration/test_db.py::test_plain[1, 2]` passed |"
    )


def test_collect_only_reports_coverage_by_collection(suite: pytest.Pytester) -> None:
    all_but(suite, "S03")
    write(
        suite,
        "tests/api/test_fails.py",
        'import pytest\n\n@pytest.mark.scenario("S03")\ndef test_f():\n    assert False\n',
    )
    result = suite.runpytest("--collect-only", "-q", "--scenario-report=out.md")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["scenarios: 45/45 covered (by collection; tests were not run)"])
    result.stdout.no_fnmatch_line("*passed*")
    report = suite.path / "out.md"
    assert "by collection only: `--collect-only` did not run the tests" in report.read_text()
    assert (
        report_row(report, "S03")
        == "| S03 |  | yes | api | 1 | `tests/api/test_fails.py::test_f` |"
    )


def test_collect_only_fails_on_a_scenario_without_a_test(suite: pytest.Pytester) -> None:
    all_but(suite, "S03")
    result = suite.runpytest("--collect-only", "-q", "--scenario-report=out.md")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["scenarios: 44/45 covered (*", "missing: S03 (no test)"])


@pytest.mark.parametrize(
    ("marker", "complaint"),
    [
        ('scenario("S46")', "unknown scenario id 'S46'"),
        ('scenario("s05")', "unknown scenario id 's05'"),
        ('scenario("S5")', "unknown scenario id 'S5'"),
        ('scenario("S00")', "unknown scenario id 'S00'"),
        ("scenario()", "scenario marker takes one id"),
        ('scenario("S01", "S02")', "scenario marker takes one id"),
        ("scenario(id='S01')", "scenario marker takes one id"),
    ],
)
@pytest.mark.parametrize("option", [[], ["--scenario-report=out.md"]], ids=["plain", "report"])
def test_a_bad_marker_fails_collection_naming_the_test(
    suite: pytest.Pytester, marker: str, complaint: str, option: list[str]
) -> None:
    write(
        suite,
        "tests/unit/test_bad.py",
        f"import pytest\n\n@pytest.mark.{marker}\ndef test_typo():\n    pass\n\n"
        "def test_fine():\n    pass\n",
    )
    result = suite.runpytest("-k", "fine", *option)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*tests/unit/test_bad.py::test_typo: {complaint}*"])
    assert not (suite.path / "out.md").exists()


def test_class_and_module_markers_count(suite: pytest.Pytester) -> None:
    all_but(suite, "S10", "S11")
    write(
        suite,
        "tests/recovery/test_marked.py",
        """
import pytest

pytestmark = pytest.mark.scenario("S10")

@pytest.mark.scenario("S11")
class TestBoth:
    @pytest.mark.scenario("S11")
    def test_one(self):
        pass
""",
    )
    result = suite.runpytest("--scenario-report=out.md")
    assert result.ret == pytest.ExitCode.OK
    expected = "| yes | recovery | 1 | `tests/recovery/test_marked.py::TestBoth::test_one` passed |"
    assert report_row(suite.path / "out.md", "S11").endswith(expected)
    assert report_row(suite.path / "out.md", "S10").endswith(expected)


def test_titles_come_from_the_spec(suite: pytest.Pytester) -> None:
    all_but(suite)
    write(suite, "spec.md", SPEC)
    result = suite.runpytest("--scenario-report=out.md", "--scenario-spec=spec.md")
    assert result.ret == pytest.ExitCode.OK
    report = suite.path / "out.md"
    assert "| S01 | GIVEN a short one, WHEN read, THEN it is kept whole. | yes |" in report_row(
        report, "S01"
    )
    s02 = report_row(report, "S02").split(" | ")[1]
    assert s02.startswith("GIVEN an entry that wraps over several lines of the file, WHEN")
    assert s02.endswith("…") and len(s02) <= 80
    assert "GIVEN a `pending\\|action` cell" in report_row(report, "S03")
    assert report_row(report, "S04").startswith("| S04 |  | yes |")
    assert report_row(report, "S44").startswith("| S44 |  | yes |")
    assert "spec was not found" not in report.read_text()


def test_a_missing_spec_leaves_ids_only(suite: pytest.Pytester) -> None:
    all_but(suite)
    result = suite.runpytest("--scenario-report=out.md", "--scenario-spec=nowhere/spec.md")
    assert result.ret == pytest.ExitCode.OK
    report = (suite.path / "out.md").read_text()
    assert "the spec was not found at `" in report
    assert "nowhere/spec.md`; ids only." in report


def test_the_default_path_is_the_checkouts_docs(suite: pytest.Pytester) -> None:
    all_but(suite)
    (suite.path / "docs").mkdir()
    result = suite.runpytest("--collect-only", "-q", "--scenario-report")
    assert result.ret == pytest.ExitCode.OK
    assert (suite.path / "docs" / "scenarios.md").is_file()


def test_a_test_path_after_the_option_is_refused(suite: pytest.Pytester) -> None:
    all_but(suite)
    result = suite.runpytest("--scenario-report", "tests/unit")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--scenario-report takes a .md file, got 'tests/unit'*"])


def test_without_the_option_nothing_is_reported(suite: pytest.Pytester) -> None:
    all_but(suite, "S01")
    result = suite.runpytest()
    assert result.ret == pytest.ExitCode.OK
    result.stdout.no_fnmatch_line("*scenario*")
    assert not (suite.path / "docs").exists()


def test_parse_spec_titles_reads_only_the_scenarios_section() -> None:
    titles = parse_spec_titles(SPEC)
    assert sorted(titles) == ["S01", "S02", "S03"]
    assert titles["S02"] == (
        "GIVEN an entry that wraps over several lines of the file, WHEN the table is written, "
        "THEN it is one line and cut short at a word boundary with an ellipsis."
    )


def test_shorten_title_does_not_split_inline_code() -> None:
    assert shorten_title("short") == "short"
    text = "GIVEN a summary says `pending_action=clarification while` more words follow here"
    assert shorten_title(text, width=50) == "GIVEN a summary says…"
