"""The layout class (``state/layout.py``), its report into ``AppState`` and the sheet variants:
the class decides which task sheet is mounted, so its thresholds must be the CSS ones."""

from __future__ import annotations

import pytest
import reflex as rx
from reflex_base.breakpoints import breakpoints_values

from components.task_sheet import SHEET_VARIANTS
from components.viewport import layout_listener
from state.app_state import AppState
from state.layout import (
    DESKTOP,
    DESKTOP_QUERY,
    PHONE,
    TABLET,
    TABLET_QUERY,
    coerce_layout,
    layout_for_width,
    sheet_variant,
)


def new_state() -> AppState:
    root = rx.State(_reflex_internal_init=True)
    return root.get_substate(AppState.get_full_name().split(".")[1:])


@pytest.mark.parametrize(
    ("width", "expected"),
    [
        (320, PHONE),
        (390, PHONE),
        (767, PHONE),
        (768, TABLET),
        (820, TABLET),
        (991, TABLET),
        (992, DESKTOP),
        (1280, DESKTOP),
    ],
)
def test_layout_for_width(width: int, expected: str) -> None:
    assert layout_for_width(width) == expected


def test_a_larger_root_font_moves_the_em_thresholds() -> None:
    assert layout_for_width(800, root_font_px=20) == PHONE
    assert layout_for_width(960, root_font_px=20) == TABLET


def test_queries_are_reflexs_sm_and_md_breakpoints() -> None:
    _xs, sm, md, *_ = breakpoints_values
    assert f"(min-width: {sm})" == TABLET_QUERY
    assert f"(min-width: {md})" == DESKTOP_QUERY


def test_each_layout_mounts_at_most_one_sheet_variant() -> None:
    assert sheet_variant(PHONE) == "phone"
    assert sheet_variant(TABLET) == "tablet"
    assert sheet_variant(DESKTOP) is None
    assert sheet_variant("") is None


@pytest.mark.parametrize("value", ["", "watch", "PHONE", None, 3])
def test_unknown_reports_are_refused(value: object) -> None:
    assert coerce_layout(value) is None


def test_set_layout_class_keeps_the_last_valid_report() -> None:
    state = new_state()
    assert state.layout_class == ""
    AppState.set_layout_class.fn(state, "tablet")
    assert state.layout_class == TABLET
    AppState.set_layout_class.fn(state, "fridge")
    assert state.layout_class == TABLET
    AppState.set_layout_class.fn(state, "phone")
    assert state.layout_class == PHONE


def test_sheet_variants_have_their_own_locators() -> None:
    phone, tablet = SHEET_VARIANTS["phone"], SHEET_VARIANTS["tablet"]
    assert (phone.sheet_id, phone.title, phone.row_prefix) == (
        "task-sheet",
        "Tasks",
        "sheet-task-row",
    )
    assert tablet.sheet_id == "tablet-task-sheet"
    assert tablet.row_prefix == "tablet-sheet-task-row"
    assert "tasks" not in tablet.title.lower()  # "Tasks" names the phone sheet, not this one
    assert (phone.direction, tablet.direction) == ("bottom", "left")


def test_the_listener_watches_both_breakpoints_and_reports_on_mount() -> None:
    (hook,) = layout_listener().add_hooks()
    code = str(hook)
    assert f"matchMedia('{TABLET_QUERY}')" in code
    assert f"matchMedia('{DESKTOP_QUERY}')" in code
    assert "changed();" in code  # the first report, on mount
    assert code.count("removeEventListener") == 2
