"""The demo data tells the rule's stories, and the overview page reads them through it."""

from __future__ import annotations

from backend.catalog import list_workspaces_with_tasks
from backend.seed import DEFAULT_STEPS, seed_demo


async def test_seed_is_idempotent_and_the_catalog_applies_the_rule(engine):
    assert await seed_demo(engine) is True
    assert await seed_demo(engine) is False

    workspaces = await list_workspaces_with_tasks(engine)
    assert [w.name for w in workspaces] == ["Acme Web", "Platform"]
    pending = {t.title: t.pending_action for w in workspaces for t in w.tasks}
    assert pending == {
        "Add a dark mode toggle": None,
        "Fix the login redirect loop": "clarification",  # owned by a secondary session
        "Write the public API docs": None,  # its question was superseded by a newer turn
        "Ship the onboarding checklist": None,
        "Upgrade PostgreSQL to 16": None,
        "Rotate the CI secrets": "permission",
    }
    steps = [t.step_name for t in workspaces[0].tasks]
    assert steps == sorted(steps, key=DEFAULT_STEPS.index)
