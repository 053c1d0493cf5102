"""Demo data so a fresh ``run`` has something to click through.

Idempotent: does nothing when any workspace exists. The demo shows the rule at work: a task
whose *secondary* session owns a current question, a session whose old question was superseded
by a newer turn (and so is inert), and a pending permission request (no agent process waits
for it, so the app's start-up recovery cancels it, as it does for any request whose agent
stopped: ``backend/recovery.py``).
"""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlmodel import SQLModel
from sqlmodel.ext.asyncio.session import AsyncSession

from backend.access import LOCAL_USER_EMAIL, hash_token
from backend.clock import utcnow
from backend.db.engine import write_tx
from backend.db.tables import table_of, workspaces
from backend.ids import new_id
from backend.models import (
    MessageType,
    RequestStatus,
    SessionState,
    Task,
    TaskSession,
    TaskSessionMessage,
    TaskSessionTurn,
    User,
    Workflow,
    WorkflowStep,
    Workspace,
    WorkspaceMembership,
)

DEFAULT_STEPS = ("Backlog", "In Progress", "Review", "Done")
#: The task state that matches each default step, so the demo board reads naturally.
STEP_TASK_STATES = ("TODO", "IN_PROGRESS", "REVIEW", "DONE")
#: Bearer tokens of the demo users, so access control can be tried on a fresh ``run``
#: (documented in the README; only their hashes are stored, as for every user).
DEMO_TOKENS = {LOCAL_USER_EMAIL: "kandev-demo-local", "sam@kandev.invalid": "kandev-demo-sam"}


def default_workflow(workspace_id: str) -> tuple[Workflow, list[WorkflowStep]]:
    workflow = Workflow(workspace_id=workspace_id, name="Default")
    steps = [
        WorkflowStep(workflow_id=workflow.id, name=name, position=position)
        for position, name in enumerate(DEFAULT_STEPS)
    ]
    return workflow, steps


class _Builder:
    """Accumulates demo rows with strictly increasing timestamps."""

    def __init__(self) -> None:
        self.rows: list[object] = []
        self._t = utcnow() - timedelta(hours=2)

    def tick(self) -> object:
        self._t += timedelta(seconds=7)
        return self._t

    def add(self, *rows: object) -> None:
        self.rows.extend(rows)

    def session(self, task: Task, state: SessionState, primary: bool) -> TaskSession:
        t = self.tick()
        session = TaskSession(
            task_id=task.id, state=state, is_primary=primary, created_at=t, updated_at=t
        )
        self.add(session)
        return session

    def turn(self, session: TaskSession, completed: bool = True) -> TaskSessionTurn:
        session.prompt_generation += 1
        t = self.tick()
        turn = TaskSessionTurn(
            session_id=session.id,
            task_id=session.task_id,
            prompt_generation=session.prompt_generation,
            started_at=t,
            created_at=t,
            completed_at=self.tick() if completed else None,
        )
        self.add(turn)
        return turn

    def message(
        self,
        turn: TaskSessionTurn,
        author: str,
        content: str,
        type_: MessageType = MessageType.MESSAGE,
        meta: dict[str, object] | None = None,
    ) -> None:
        self.add(
            TaskSessionMessage(
                session_id=turn.session_id,
                task_id=turn.task_id,
                turn_id=turn.id,
                type=type_,
                author=author,
                content=content,
                meta=meta or {},
                created_at=self.tick(),
            )
        )

    def question(
        self, turn: TaskSessionTurn, text: str, options: list[str], **extra: object
    ) -> str:
        pending_id = new_id()
        meta = {
            "pending_id": pending_id,
            "status": RequestStatus.PENDING.value,
            "question": text,
            "options": [{"id": f"o{i}", "label": label} for i, label in enumerate(options, 1)],
            "agent_disconnected": True,
            **extra,
        }
        self.message(turn, "agent", text, MessageType.CLARIFICATION_REQUEST, meta)
        return pending_id


def _demo_rows() -> list[object]:
    b = _Builder()
    local = User(name="Local user", email=LOCAL_USER_EMAIL)
    sam = User(name="Sam Rivera", email="sam@kandev.invalid")
    for user in (local, sam):
        user.token_hash = hash_token(DEMO_TOKENS[user.email])
    b.add(local, sam)

    acme = Workspace(name="Acme Web")
    platform = Workspace(name="Platform")
    b.add(acme, platform)
    b.add(
        WorkspaceMembership(workspace_id=acme.id, user_id=local.id, role="owner"),
        WorkspaceMembership(workspace_id=platform.id, user_id=local.id, role="owner"),
        WorkspaceMembership(workspace_id=platform.id, user_id=sam.id),
    )

    for workspace, tasks in (
        (
            acme,
            [
                ("Add a dark mode toggle", 0, None),
                ("Fix the login redirect loop", 1, "secondary_question"),
                ("Write the public API docs", 2, "superseded_question"),
                ("Ship the onboarding checklist", 3, "clean"),
            ],
        ),
        (
            platform,
            [
                ("Upgrade PostgreSQL to 16", 0, None),
                ("Rotate the CI secrets", 1, "permission"),
            ],
        ),
    ):
        workflow, steps = default_workflow(workspace.id)
        b.add(workflow, *steps)
        for title, step, story in tasks:
            t = b.tick()
            task = Task(
                workspace_id=workspace.id,
                workflow_id=workflow.id,
                workflow_step_id=steps[step].id,
                title=title,
                state=STEP_TASK_STATES[step],
                created_at=t,
                updated_at=t,
            )
            b.add(task)
            _story(b, task, story)
    return b.rows


def _story(b: _Builder, task: Task, story: str | None) -> None:
    if story is None:
        return
    if story == "clean":
        session = b.session(task, SessionState.COMPLETED, primary=True)
        turn = b.turn(session)
        b.message(turn, "user", "Build the onboarding checklist from the design doc.")
        b.message(turn, "agent", "Done: the checklist ships behind the `onboarding` flag.")
    elif story == "secondary_question":
        primary = b.session(task, SessionState.IDLE, primary=True)
        turn = b.turn(primary)
        b.message(turn, "user", "Reproduce the redirect loop on /login.")
        b.message(turn, "agent", "Reproduced: the session cookie is dropped on the 302.")
        secondary = b.session(task, SessionState.WAITING_FOR_INPUT, primary=False)
        turn = b.turn(secondary)
        b.message(turn, "user", "Fix the cookie handling and add a regression test.")
        b.question(
            turn,
            "Should the fix also cover the legacy /signin route?",
            ["Yes, fix both routes", "No, /login only"],
        )
    elif story == "superseded_question":
        session = b.session(task, SessionState.IDLE, primary=True)
        old = b.turn(session)
        b.message(old, "user", "Draft the API docs.")
        b.question(old, "Which API version should the docs target?", ["v1", "v2"])
        new = b.turn(session)
        b.message(new, "user", "Target v1 and publish the draft.")
        b.message(new, "agent", "Draft published for v1.")
    elif story == "permission":
        session = b.session(task, SessionState.WAITING_FOR_INPUT, primary=True)
        turn = b.turn(session, completed=False)
        b.message(turn, "user", "Rotate every CI secret older than 90 days.")
        b.message(
            turn,
            "agent",
            "May I run `ci secrets rotate --older-than 90d`?",
            MessageType.PERMISSION_REQUEST,
            {"pending_id": new_id(), "status": RequestStatus.PENDING.value},
        )


async def seed_demo(engine: AsyncEngine) -> bool:
    """Insert the demo rows unless the database already has a workspace; True if inserted."""
    async with write_tx(engine) as conn:
        if (await conn.execute(select(func.count()).select_from(workspaces))).scalar_one():
            return False
        session = AsyncSession(bind=conn)
        rows = _demo_rows()
        # Flush table by table in foreign-key order (the models declare no ORM relationships).
        for table in SQLModel.metadata.sorted_tables:
            session.add_all([row for row in rows if table_of(row) is table])
            await session.flush()
    return True
