"""Drag and drop of board cards between columns, with the browser's native drag events.

Only the drop reaches the server (``on_drop(step_id, task_id)``). Dragging, hovering and the
drop-target highlight are plain DOM work, so a drag costs no round trips and cannot lag behind
the pointer. A dragged card carries its task id under :data:`CARD_MIME` (Firefox starts a drag
only when data is set); a column accepts only that type, so files or text dragged in from
elsewhere never light it up or reach the server. While a card is over a column, the column
carries ``data-drop-over`` (styled in ``components/board.py``).

Drag and drop is the pointer's shortcut. Every card keeps its "Move to" menu, which is how the
keyboard, screen readers and touch screens move it.
"""

from __future__ import annotations

from typing import Any

import reflex as rx
from reflex_base.vars.base import Var

#: The drag data type of a board card; its value is the task id.
CARD_MIME = "application/x-kandev-task"

_START = f"""((e) => {{
    e.dataTransfer.setData('{CARD_MIME}', e.currentTarget.dataset.taskId);
    e.dataTransfer.effectAllowed = 'move';
}})"""

_END = """(() => {
    document.querySelectorAll('[data-drop-over]').forEach((el) => {
        delete el.dataset.dropOver;
    });
})"""

_OVER = f"""((e) => {{
    if (!e.dataTransfer.types.includes('{CARD_MIME}')) return;
    e.preventDefault();
    e.dataTransfer.dropEffect = 'move';
    e.currentTarget.dataset.dropOver = 'true';
}})"""

_LEAVE = """((e) => {
    if (!e.currentTarget.contains(e.relatedTarget)) delete e.currentTarget.dataset.dropOver;
})"""


def _dropped_card(e: Var[Any]) -> tuple[Var[str], Var[str]]:
    """The drop's column (its ``data-step-id``) and the card's task id, read while the drop
    event is being dispatched (afterwards the browser empties ``dataTransfer``)."""
    return (
        Var(f"{e}.currentTarget.dataset.stepId").to(str),
        Var(f"({e}.dataTransfer.getData('{CARD_MIME}') || '')").to(str),
    )


def _with_attrs(props: dict[str, Any], attrs: dict[str, Any]) -> dict[str, Any]:
    """The drag attributes and handlers, plus any ``custom_attrs`` the caller passed (taken out
    of ``props``). Handlers go in as raw attributes: they are DOM work, not Reflex events."""
    return {**attrs, **props.pop("custom_attrs", {})}


class DropColumn(rx.el.Section):
    """A board column that takes dropped cards: ``on_drop(step_id, task_id)``."""

    on_drop: rx.EventHandler[_dropped_card]

    @classmethod
    def create(cls, *children: Any, step_id: Any, **props: Any) -> rx.Component:
        attrs = {"data-step-id": step_id, "onDragOver": Var(_OVER), "onDragLeave": Var(_LEAVE)}
        return super().create(*children, custom_attrs=_with_attrs(props, attrs), **props)


def draggable_card(*children: Any, task_id: Any, **props: Any) -> rx.Component:
    """A card the pointer can drag onto another :class:`DropColumn`."""
    attrs = {"data-task-id": task_id, "onDragStart": Var(_START), "onDragEnd": Var(_END)}
    return rx.flex(*children, draggable=True, custom_attrs=_with_attrs(props, attrs), **props)
