"""Runs accepted prompts in the background and calls the backend back (the agent's side).

One asyncio task per prompt, so the 202 is never held up by the turn itself. The runner never
crashes the server: every failure ends that prompt's task with one log line.

Callback rules (``docs/agent-protocol.md``):
- a 409 from any callback means the turn is no longer current: stop, complete nothing;
- the long-poll outcomes: ``answered`` -> ``Got: ...`` and go on; ``rejected`` -> ``Skipped.``
  and go on; ``detached`` -> complete the turn at once; ``expired`` (terminal session) -> stop
  without completing; anything else is a protocol error that ends the run;
- connection refused is retried for a bounded time (the request certainly did not arrive, and
  the backend may be restarting); other failures end the run, because repeating a message
  that may have arrived would duplicate it;
- the clarification long-poll's timeout is ``wait_seconds`` plus a margin; if it breaks after
  sending, the backend treats the dropped connection as a detach, so the agent does the same.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import httpx

from backend.agentctl.client import PromptRequest
from backend.agentctl.mock.script import Ask, Fail, Reply, Sleep, parse_script, questions_payload
from backend.agentctl.protocol import clarifications_path, complete_path, messages_path

logger = logging.getLogger(__name__)

CALLBACK_TIMEOUT_S = 30.0
LONG_POLL_MARGIN_S = 30.0
CONNECT_RETRY_S = 30.0


class _Superseded(Exception):
    """The backend answered 409: this turn is no longer the session's current turn."""


class _SessionEnded(Exception):
    """The long-poll answered ``expired``: the session is terminal and takes no more output."""


class _CallbackFailed(Exception):
    """A callback failed in a way that is not safe to repeat."""


class Runner:
    """Owns the background tasks of running prompts and their shared HTTP client."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        *,
        default_wait_s: float,
        connect_retry_s: float = CONNECT_RETRY_S,
        long_poll_margin_s: float = LONG_POLL_MARGIN_S,
    ) -> None:
        self._http = http
        self.default_wait_s = default_wait_s
        self._connect_retry_s = connect_retry_s
        self._margin_s = long_poll_margin_s
        self._tasks: set[asyncio.Task[None]] = set()

    def start(self, job: PromptRequest) -> asyncio.Task[None]:
        task = asyncio.create_task(self._run(job), name=f"prompt {job.turn_id}")
        self._tasks.add(task)  # keep a reference: the loop only holds weak ones
        task.add_done_callback(self._tasks.discard)
        return task

    async def aclose(self) -> None:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _run(self, job: PromptRequest) -> None:
        try:
            await self._execute(job)
        except _Superseded:
            logger.info("turn %s superseded; stopped without completing", job.turn_id)
        except _SessionEnded:
            logger.info("turn %s: session ended (expired); stopped without completing", job.turn_id)
        except _CallbackFailed as exc:
            logger.warning("turn %s stopped: %s", job.turn_id, exc)
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("turn %s crashed", job.turn_id)

    async def _execute(self, job: PromptRequest) -> None:
        if job.answer is not None:
            await self._message(job, answer_reply(job.answer))
            await self._complete(job, "completed")
            return
        for step in parse_script(job.content, self.default_wait_s):
            if isinstance(step, Reply):
                await self._message(job, step.text)
            elif isinstance(step, Sleep):
                await asyncio.sleep(step.ms / 1000)
            elif isinstance(step, Fail):
                await self._complete(job, "failed")
                return
            elif isinstance(step, Ask):
                outcome = await self._ask(job, step)
                kind = outcome.get("outcome")
                if kind == "answered":
                    await self._message(job, format_answers(outcome.get("answers")))
                elif kind == "rejected":
                    await self._message(job, "Skipped.")
                elif kind in ("detached", "cancelled"):  # the turn ends without an answer
                    break
                elif kind == "expired":
                    raise _SessionEnded()
                else:
                    raise _CallbackFailed(f"unknown clarification outcome {kind!r}")
        await self._complete(job, "completed")

    async def _message(self, job: PromptRequest, content: str) -> None:
        body = {"turn_id": job.turn_id, "prompt_generation": job.prompt_generation}
        await self._post(job, messages_path(job.session_id), {**body, "content": content})

    async def _complete(self, job: PromptRequest, status: str) -> None:
        body = {"prompt_generation": job.prompt_generation, "status": status}
        await self._post(job, complete_path(job.session_id, job.turn_id), body)

    async def _ask(self, job: PromptRequest, ask: Ask) -> dict[str, Any]:
        wait = ask.wait_seconds
        body = {
            "turn_id": job.turn_id,
            "prompt_generation": job.prompt_generation,
            "questions": questions_payload(ask),
            "wait_seconds": int(wait) if wait.is_integer() else wait,
        }
        path = clarifications_path(job.session_id)
        try:
            response = await self._post(job, path, body, read_timeout_s=wait + self._margin_s)
        except _CallbackFailed as exc:
            if isinstance(exc.__cause__, httpx.TransportError):
                logger.info("turn %s: long-poll broke (%s); treating as detached", job.turn_id, exc)
                return {"outcome": "detached"}
            raise
        try:
            outcome = response.json()
        except ValueError:
            outcome = None
        if not isinstance(outcome, dict):
            raise _CallbackFailed("malformed clarification answer")
        return outcome

    async def _post(
        self,
        job: PromptRequest,
        path: str,
        body: dict[str, Any],
        *,
        read_timeout_s: float = CALLBACK_TIMEOUT_S,
    ) -> httpx.Response:
        url = job.callback_url.rstrip("/") + path
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._connect_retry_s
        delay = 0.1
        while True:
            try:
                response = await self._http.post(
                    url,
                    json=body,
                    headers={"Authorization": f"Bearer {job.agent_token}"},
                    timeout=read_timeout_s,
                )
                break
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                if loop.time() + delay > deadline:
                    raise _CallbackFailed(f"POST {path}: backend unreachable") from exc
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
            except httpx.HTTPError as exc:
                raise _CallbackFailed(f"POST {path}: {type(exc).__name__}") from exc
        if response.status_code == 409:
            raise _Superseded()
        if not response.is_success:
            raise _CallbackFailed(f"POST {path} answered {response.status_code}")
        return response


def format_answers(answers: Any) -> str:
    """``Got: question: label, label, text; question: ...`` from the protocol's answers list."""
    parts = []
    for answer in answers if isinstance(answers, list) else []:
        if not isinstance(answer, dict):
            continue
        labels = answer.get("option_labels")
        values = [str(label) for label in labels] if isinstance(labels, list) else []
        if answer.get("text"):
            values.append(str(answer["text"]))
        parts.append(f"{answer.get('question', '')}: {', '.join(values)}")
    return "Got: " + "; ".join(parts)


def answer_reply(answer: dict[str, Any]) -> str:
    """The reply to a resume prompt: ``Skipped.`` for a skipped bundle, else ``Got: ...``."""
    if answer.get("rejected") is True:
        return "Skipped."
    return format_answers(answer.get("answers"))
