"""What `record` keeps of a framework's runs, and how each becomes an ordinary `Run`.

A framework hook (`_record_<framework>.py`) watches the caller's own calls of the agent and
fills one `Taken` per run of it: one `Seen` per model call (what the model was sent, its
reply or error, when), the tool calls' results as the framework reports them, the output.

`build` then makes each `Taken` a `Run` on thena_nb's own executor: a one-step workflow whose
step (`_Playback`, a `ForeignAgent`) reports the recorded model calls and tool results to the
executor's `TurnPort`, as a framework step does live. So a recorded run is built by the same
code as a `Workflow.of(agent)` run: the same turns, request keys, report tree, usage and store
rows; no model and no tool is called again. The store sees the recorded times (`_Retimed`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, Protocol

from thena_nb.core.engine.foreign import ForeignAgent, ForeignRequest, TurnPort, _Live
from thena_nb.core.records.model import Reply, ToolSpec
from thena_nb.core.records.report import ReportNode
from thena_nb.core.runs.run import Run
from thena_nb.core.store.base import RunRecorder, TurnRecord, resolve_store
from thena_nb.core.workflow import Workflow

__all__ = ["Hook", "Seen", "Taken", "Unfinished", "build", "clock", "close_unended"]


def clock() -> tuple[datetime, float]:
    """Now, as a wall-clock time and a monotonic one (for durations)."""
    return datetime.now(UTC), time.perf_counter()


@dataclass
class Seen:
    """One model call the framework made: what it sent, what came back, when."""

    system: str
    tools: list[ToolSpec]
    canonical: Any
    """What else it sent, without per-run values: part of the turn's request key."""
    model: str = ""
    max_tokens: int = 0
    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    t0: float = field(default_factory=time.perf_counter)
    duration_s: float = 0.0
    reply: Reply | None = None
    error: BaseException | None = None
    results: dict[str, tuple[bool, str]] = field(default_factory=dict)
    """`{call_id: (ok, text)}`: what each of the reply's tool calls gave the model."""

    def answered(self, reply: Reply) -> None:
        """The model answered `reply`."""
        self.reply = reply
        self.duration_s = time.perf_counter() - self.t0

    def failed(self, exc: BaseException) -> None:
        """The model call raised `exc`."""
        self.error = exc
        self.duration_s = time.perf_counter() - self.t0


@dataclass
class Taken:
    """One run of the agent made inside the `record` block."""

    input: str = ""
    seen: list[Seen] = field(default_factory=list)
    output: Any = None
    ended: bool = False
    """The framework said the run ended (with `output`, or with `error`)."""
    error: BaseException | None = None
    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    finished_at: datetime | None = None

    def result(self, call_id: str, ok: bool, text: str, *, final: bool = True) -> None:
        """What tool call `call_id` gave the model (the last model call that made it);
        `final=False`: unless the framework tells the model something else later."""
        for seen in reversed(self.seen):
            if seen.reply is not None and any(c.id == call_id for c in seen.reply.tool_calls):
                if final or call_id not in seen.results:
                    seen.results[call_id] = (ok, text)
                return

    def unanswered(self) -> list[str]:
        """The last model call's tool calls that have no result."""
        last = self.seen[-1] if self.seen else None
        if last is None or last.reply is None:
            return []
        return [c.id for c in last.reply.tool_calls if c.id not in last.results]


class Unfinished(Exception):
    """What a recorded run failed with when the framework never said it ended and the block
    did not raise: it raised and the caller caught the error inside the block, it stopped to
    wait for an approval, or it was still running when the block ended."""


def close_unended(taken: Taken, error: BaseException | None, framework: str) -> None:
    """A run the framework did not say ended, at the end of the block: it failed with its
    model's error (kept on its last model call), else with what the block raised (`error`),
    else as `Unfinished`. With `error`, the calls whose results were not seen failed with it."""
    if taken.ended or taken.error is not None:
        return
    last = taken.seen[-1] if taken.seen else None
    if last is not None and last.error is not None:
        return
    if error is None:
        taken.error = Unfinished(
            f"the {framework} run did not end inside the `record` block: it raised and the "
            f"error was caught inside the block, it stopped to wait for an approval, or it was "
            f"still running when the block ended"
        )
        return
    taken.error = error
    for call_id in taken.unanswered():
        taken.result(call_id, False, _text_of(error))


class Hook(Protocol):
    """A framework's seam for `record`: holds the agent while the block runs."""

    framework: str
    """The framework's name, as users know it."""
    name: str
    """The agent's name: the recorded runs' workflow and step name."""
    model: _Live
    """The agent's model as thena_nb names and prices it."""

    def start(self) -> None:
        """Begin watching the agent's runs (the block is entered)."""

    def stop(self, error: BaseException | None) -> None:
        """Stop watching and put everything back (`error`: what the block raised)."""

    def taken(self) -> list[Taken]:
        """The runs seen, in the order they started."""


class _Ended(Exception):
    """How a recorded run that failed ends its playback; the run keeps the original's text."""


def _text_of(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


class _Playback(ForeignAgent):
    """A recorded run of a framework's agent, reported to the executor as it happened."""

    overrides: dict[str, Any]

    def __init__(self, hook: Hook, taken: Taken) -> None:
        self.overrides = {}
        self.framework = hook.framework
        super().__init__(hook.name, target=taken, model=hook.model)
        self.taken = taken

    async def drive(self, port: TurnPort) -> Any:
        taken: Taken = self.target
        for seen in taken.seen:
            await self._turn(port, seen)
        if taken.error is not None and (not taken.seen or taken.seen[-1].error is None):
            raise _Ended(_text_of(taken.error))
        if not taken.ended and taken.unanswered():
            raise _Ended(
                f"the {self.framework} run ended before the results of its last tool calls "
                f"were seen (the block ended, or the framework raised)"
            )
        return taken.output

    async def _turn(self, port: TurnPort, seen: Seen) -> None:
        async def live() -> Reply:
            if seen.error is not None:
                raise _Ended(_text_of(seen.error))
            assert seen.reply is not None
            return seen.reply

        asked = ForeignRequest(
            system=seen.system,
            tools=seen.tools,
            canonical=seen.canonical,
            live=live,
            model=seen.model,
            max_tokens=seen.max_tokens,
        )
        _, proposed, _ = await port.model_call(asked)
        for call in proposed:
            outcome = seen.results.get(call.id)
            if outcome is None or port.before_tool(call.id) is None:
                continue
            ok, text = outcome
            if ok:
                port.after_tool(call.id, result=text)
            else:
                port.after_tool(call.id, error=_Ended(text), message=text)

    def configuration(self) -> Any:
        return ("record", self.framework, self.name, self.model.name)


class _Retimed:
    """The store's recorder, given the recorded times (and the original error) of a run
    that is being built after it happened."""

    def __init__(self, target: RunRecorder | None, taken: Taken) -> None:
        self.target = target
        self.taken = taken

    async def run_started(self, run: Run) -> None:
        run.started_at = self.taken.started_at
        if self.target is not None:
            await self.target.run_started(run)

    async def turn_recorded(self, run: Run, record: TurnRecord) -> None:
        turn = record.turn
        if turn.index < len(self.taken.seen):
            seen = self.taken.seen[turn.index]
            turn = turn.model_copy(
                update={"started_at": seen.started_at, "duration_s": seen.duration_s}
            )
            if run.turns and run.turns[-1] is record.turn:
                run.turns[-1] = turn
            record = replace(record, turn=turn)
        if self.target is not None:
            await self.target.turn_recorded(run, record)

    async def run_finished(self, run: Run) -> None:
        taken = self.taken
        last = taken.seen[-1] if taken.seen else None
        ended = taken.finished_at
        if ended is None and last is not None:
            ended = last.started_at + timedelta(seconds=last.duration_s)
        run.finished_at = ended or run.finished_at
        error = taken.error or (last.error if last is not None else None)
        if run.status == "failed" and error is not None:
            run.error = _text_of(error)
            _fix_errors(run.report, run.error)
        if self.target is not None:
            await self.target.run_finished(run)


def _fix_errors(node: ReportNode, text: str) -> None:
    if node.error and node.error.startswith(f"{_Ended.__name__}: "):
        node.error = text
    for child in node.children:
        _fix_errors(child, text)


async def _one(hook: Hook, taken: Taken, store: RunRecorder | None) -> Run:
    step = _Playback(hook, taken)
    wf = Workflow(hook.name, [step])
    try:
        run = await wf.arun(taken.input, store=_Retimed(store, taken))
    except Exception as exc:  # the recorded run failed: the partial run is on the error
        partial = getattr(exc, "run", None)
        if not isinstance(partial, Run):
            raise
        run = partial
    run.workflow = None  # its step only replays this record: fork with `workflow=`
    return run


async def build(
    hook: Hook, taken: Sequence[Taken], store: RunRecorder | Literal[False] | None
) -> list[Run]:
    """Each recorded run of `hook`'s agent as a `Run`, kept in `store` as `wf.run` keeps
    runs (`None`: the default store; `False`: none)."""
    target = resolve_store(store)
    return [await _one(hook, t, target) for t in taken]
