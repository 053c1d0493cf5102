"""A small synchronous client of the app's REST API for browser tests: it prepares data (tasks
whose secondary session asks a question) and drives the test API (fault points, the agent's
prompt record) while the browser looks at the same app."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import httpx


@dataclass(frozen=True)
class PendingTask:
    """A task whose secondary (non-primary) session owns a current question."""

    task_id: str
    title: str
    primary_id: str
    secondary_id: str
    question: str
    options: tuple[str, ...]


class Api:
    def __init__(self, base_url: str) -> None:
        self.client = httpx.Client(base_url=f"{base_url}/api/v1", timeout=30)

    def close(self) -> None:
        self.client.close()

    def _ok(self, response: httpx.Response) -> Any:
        if response.status_code >= 400:
            raise AssertionError(f"{response.request.url}: {response.status_code} {response.text}")
        return response.json() if response.content else None

    def get(self, path: str) -> Any:
        return self._ok(self.client.get(path))

    def post(self, path: str, body: dict[str, Any]) -> Any:
        return self._ok(self.client.post(path, json=body))

    def tasks(self) -> list[dict[str, Any]]:
        return self.get("/tasks")["tasks"]

    def task(self, task_id: str) -> dict[str, Any]:
        return self.get(f"/tasks/{task_id}")

    def task_by_title(self, title: str) -> dict[str, Any]:
        return next(t for t in self.tasks() if t["title"] == title)

    def sessions(self, task_id: str) -> list[dict[str, Any]]:
        return self.get(f"/tasks/{task_id}/task-sessions")["sessions"]

    def messages(self, session_id: str) -> list[dict[str, Any]]:
        return self.get(f"/task-sessions/{session_id}/messages")["messages"]

    def bundles(self, session_id: str) -> list[dict[str, Any]]:
        return self.get(f"/task-sessions/{session_id}/clarifications")["bundles"]

    def prompt(self, session_id: str, content: str) -> str:
        return self.post(f"/task-sessions/{session_id}/prompt", {"content": content})["turn_id"]

    def agent_prompts(self) -> list[dict[str, Any]]:
        return self.get("/_test/agent/prompts")["prompts"]

    def hold(self, failpoint: str) -> None:
        self._ok(self.client.put(f"/_test/failpoints/{failpoint}", json={"action": "hold"}))

    def release(self, failpoint: str) -> None:
        self._ok(self.client.delete(f"/_test/failpoints/{failpoint}"))

    def wait_for(self, probe: Any, what: str, within_s: float = 15.0) -> Any:
        deadline = time.monotonic() + within_s
        while True:
            value = probe()
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: not within {within_s}s (last {value!r})")
            time.sleep(0.05)

    def idle(self, session_id: str, task_id: str) -> None:
        """Wait until the session's current turn has finished (the agent is not mid-turn)."""
        busy = ("CREATED", "STARTING", "RUNNING")

        def settled() -> bool:
            states = {s["id"]: s["state"] for s in self.sessions(task_id)}
            return states.get(session_id, "RUNNING") not in busy

        self.wait_for(settled, f"session {session_id} idle")

    def pending_task(
        self,
        title: str,
        question: str,
        options: tuple[str, ...] = ("Yes", "No"),
        *,
        detached: bool = True,
        extra_questions: tuple[str, ...] = (),
        multi_select: bool = False,
    ) -> PendingTask:
        """A new task: a clean primary session, then a secondary session that asks
        ``question`` (detached at once, or live when ``detached=False``; a multi-select
        question with ``multi_select``)."""
        task = self.post("/tasks", {"title": title})
        primary = self.post(f"/tasks/{task['id']}/task-sessions", {"prompt": "/reply Ready."})
        self.idle(primary["id"], task["id"])
        lines = [" | ".join((question, *options))]
        lines += [f"/ask {q}" for q in extra_questions]
        script = (
            ("/askmany " if multi_select else "/ask ")
            + "\n".join(lines)
            + ("\n/disconnect" if detached else "")
        )
        secondary = self.post(
            f"/tasks/{task['id']}/task-sessions", {"prompt": script, "is_primary": False}
        )
        self.wait_for(
            lambda: (
                (self.task(task["id"]).get("status_summary") or {}).get("pending_action")
                == "clarification"
            ),
            f"task {title!r} advertises its question",
        )
        if detached:
            # The question is advertised as soon as it is stored, while the agent still waits
            # on it; "detached" means the agent has gone, so wait for the detach as well.
            self.wait_for(
                lambda: all(b["state"] == "active_detached" for b in self.bundles(secondary["id"])),
                f"the question of {title!r} is detached",
            )
        return PendingTask(
            task["id"], title, primary["id"], secondary["id"], question, tuple(options)
        )

    def permission_task(self, title: str, script: str) -> tuple[str, str]:
        """A new task whose session's agent waits on a permission request (``/permit`` in
        ``script``); returns the task and session ids once the task advertises it."""
        task = self.post("/tasks", {"title": title})
        session = self.post(f"/tasks/{task['id']}/task-sessions", {"prompt": script})
        self.wait_for(
            lambda: self.pending_action(task["id"]) == "permission",
            f"task {title!r} advertises its permission request",
        )
        return task["id"], session["id"]

    # -- fault points, moves and summaries (lifecycle tests) ---------------------------------

    def hold_next(self, failpoint: str, count: int = 1) -> None:
        """Hold only the next ``count`` hits of ``failpoint``; later hits pass straight on."""
        self._ok(
            self.client.put(
                f"/_test/failpoints/{failpoint}", json={"action": "hold", "count": count}
            )
        )

    def failpoint_hits(self, failpoint: str) -> int:
        """How often ``failpoint`` was reached since it was set (0 when it is not set)."""
        point = self.get("/_test/failpoints")["failpoints"].get(failpoint)
        return int(point["hits"]) if point else 0

    def wait_held(self, failpoint: str, hits: int = 1) -> None:
        """Wait until ``failpoint`` (set to hold) was reached ``hits`` times."""
        self.wait_for(
            lambda: self.failpoint_hits(failpoint) >= hits, f"{failpoint} reached {hits}x"
        )

    def pending_action(self, task_id: str) -> str | None:
        """The task's status-summary ``pending_action`` (``None`` when clean or unknown)."""
        return (self.task(task_id).get("status_summary") or {}).get("pending_action")

    def step_id(self, task_id: str, step_name: str) -> str:
        """The id of the step called ``step_name`` in the task's workflow."""
        workflow_id = self.task(task_id)["workflow_id"]
        steps = self.get(f"/workflows/{workflow_id}/snapshot")["steps"]
        return next(s["id"] for s in steps if s["name"] == step_name)

    def move(self, task_id: str, step_name: str) -> httpx.Response:
        """``POST /tasks/{id}/move`` to the named step; the raw response (may be a 409)."""
        step = self.step_id(task_id, step_name)
        return self.client.post(f"/tasks/{task_id}/move", json={"workflow_step_id": step})

    def session(self, task_id: str, session_id: str) -> dict[str, Any]:
        return next(s for s in self.sessions(task_id) if s["id"] == session_id)

    def prompts_of(self, session_id: str) -> list[dict[str, Any]]:
        """The agent's durable record of prompts for one session, in order."""
        return [p for p in self.agent_prompts() if p["session_id"] == session_id]
