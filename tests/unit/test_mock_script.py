"""The mock agent's script parser: prompt text -> steps (pure)."""

from __future__ import annotations

import pytest

from backend.agents.mock_script import (
    DEFAULT_WAIT_S,
    Ask,
    Fail,
    Permit,
    Question,
    Reply,
    Sleep,
    parse_script,
)


def test_plain_text_is_one_echo_of_the_whole_text() -> None:
    assert parse_script("  fix the bug\nplease  \n") == [Reply("Echo: fix the bug\nplease")]


def test_blank_content_has_no_steps() -> None:
    assert parse_script("") == []
    assert parse_script(" \n\t\n") == []


def test_every_reply_line_is_its_own_message_in_order() -> None:
    assert parse_script("/reply one\n/reply  two words \n/reply") == [
        Reply("one"),
        Reply("two words"),
    ]


def test_sleep_and_fail_keep_their_place() -> None:
    assert parse_script("/reply a\n/sleep 250\n/fail\n/reply b") == [
        Reply("a"),
        Sleep(250),
        Fail(),
        Reply("b"),
    ]


def test_several_asks_form_one_bundle_at_the_first_ask() -> None:
    steps = parse_script("/reply hi\n/ask Which DB? | Postgres |  | SQLite\n/reply mid\n/ask Name?")
    assert steps == [
        Reply("hi"),
        Ask(
            (Question("Which DB?", ("Postgres", "SQLite")), Question("Name?")),
            DEFAULT_WAIT_S,
        ),
        Reply("mid"),
    ]


@pytest.mark.parametrize(
    "content",
    ["/wait 12.5\n/ask Q", "/ask Q\n/wait 12.5", "/wait 3\n/ask Q\n/reply x\n/wait 12.5"],
)
def test_wait_applies_to_the_bundle_wherever_it_stands_and_the_last_wins(content: str) -> None:
    [ask, *_] = parse_script(content)
    assert ask == Ask((Question("Q"),), 12.5)


def test_the_default_wait_comes_from_the_caller() -> None:
    assert parse_script("/ask Q", default_wait_s=7) == [Ask((Question("Q"),), 7)]


@pytest.mark.parametrize(
    "content", ["/disconnect\n/ask Q\n/wait 30", "/ask Q\n/wait 30\n/disconnect"]
)
def test_disconnect_forces_wait_zero(content: str) -> None:
    assert parse_script(content) == [Ask((Question("Q"),), 0.0)]


def test_wait_and_disconnect_without_ask_do_nothing() -> None:
    assert parse_script("/wait 5\n/disconnect") == []


def test_ask_without_a_question_is_ignored() -> None:
    assert parse_script("/ask\n/ask  | a | b") == []


def test_plain_text_runs_between_commands_are_separate_echoes() -> None:
    assert parse_script("one\ntwo\n/reply r\nthree") == [
        Reply("Echo: one\ntwo"),
        Reply("r"),
        Reply("Echo: three"),
    ]


@pytest.mark.parametrize(
    "line",
    [
        "/sleep soon",
        "/sleep -5",
        "/sleep ²",
        "/wait never",
        "/wait -1",
        "/wait nan",
        "/fail now",
        "/unknown x",
    ],
)
def test_malformed_commands_are_plain_text(line: str) -> None:
    assert parse_script(line) == [Reply(f"Echo: {line}")]


def test_askmany_asks_a_multi_select_question_in_the_same_bundle() -> None:
    steps = parse_script("/ask Name?\n/askmany Which targets? | web | ios | android")
    assert steps == [
        Ask(
            (Question("Name?"), Question("Which targets?", ("web", "ios", "android"), True)),
            DEFAULT_WAIT_S,
        )
    ]


def test_permit_asks_at_its_place_with_default_or_given_options() -> None:
    assert parse_script(
        "/reply a\n/permit Delete build/?\n/permit Push? | Yes |  | No\n/permit"
    ) == [
        Reply("a"),
        Permit("Delete build/?", ("Allow", "Reject")),
        Permit("Push?", ("Yes", "No")),
    ]


@pytest.mark.parametrize("content", ["/elicit\n/ask Q | a", "/ask Q | a\n/elicit"])
def test_elicit_asks_the_bundle_natively_wherever_it_stands(content: str) -> None:
    assert parse_script(content) == [Ask((Question("Q", ("a",)),), DEFAULT_WAIT_S, native=True)]


def test_elicit_with_an_argument_is_plain_text() -> None:
    assert parse_script("/elicit now") == [Reply("Echo: /elicit now")]
