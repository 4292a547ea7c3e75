"""`Workflow`: a named list of steps, checked before anything runs."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import types
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel

from thena_nb.core import _portals
from thena_nb.core._collector import fewer_collections
from thena_nb.core.engine._replay import Replay
from thena_nb.core.parts._tool_size import DEFAULT_MAX_TOOL_RESULT_CHARS, checked_max_chars
from thena_nb.core.parts._tool_time import checked_timeout
from thena_nb.core.parts.agent import Agent
from thena_nb.core.parts.changes import Changes
from thena_nb.core.parts.steps import LoopStep, ParallelStep, step_name, step_path
from thena_nb.core.parts.stopping import condition_arity, condition_parts
from thena_nb.core.records import _html
from thena_nb.core.records.errors import WorkflowDefinitionError
from thena_nb.core.records.types import Budget, RetryPolicy

# Defining a workflow needs none of the machinery that runs one (sessions, the executor,
# the event loop, asyncio, the stores): the methods that run import it when first called,
# so `import thena_nb` does not load it (tests/test_import_cost.py).
if TYPE_CHECKING:
    from thena_nb.core.engine.session import Session
    from thena_nb.core.records.decisions import Approver, Decision
    from thena_nb.core.runs.run import Run
    from thena_nb.core.store.base import RunRecorder, RunStore

__all__ = ["Workflow"]


class Workflow:
    """A named sequence of steps that runs as one unit.

    Args:
        name: The workflow's name; the root of every step path.
        steps: Agents, `parallel(...)`, `loop(...)` and plain functions `fn(ctx)`, in order.
        state: A pydantic model class; each run starts with `state()` and every step and
            `until(ctx, state)` sees the same object.
        budget: Run-wide limits (`Budget`).
        retry: How transient model errors are retried (`RetryPolicy`).
        tool_timeout: Seconds any tool call may take, for tools that set no `timeout` of
            their own (`None`: no limit); a call past it is a failed tool call.
        max_tool_result_chars: The longest tool result (or error) kept and sent to the model,
            in characters (default 100,000, about 25,000 tokens; `None`: no limit). A longer
            one keeps its first and last halves of that around a note of how much was cut,
            and its call's `result_cut` says how many characters were cut.

    Raises:
        WorkflowDefinitionError: The definition is wrong (before any model call, S9).

    Example:
        >>> from thena_nb import Agent, Workflow, loop, tool, until_answered
        >>> from thena_nb.models import ScriptedModel, reply
        >>> @tool
        ... def add(a: int, b: int) -> int:
        ...     '''Add two numbers.'''
        ...     return a + b
        >>> calc = Agent("Calc", model=ScriptedModel([reply.tool("add", a=2, b=2), "4"]),
        ...              tools=[add])
        >>> wf = Workflow("sums", [loop(steps=[calc], until=until_answered)])
        >>> run = wf.run("What is 2 + 2?")
        >>> run.output, run.loops[0].stop_reason, run.loops[0].iterations
        ('4', 'until', 2)
    """

    def __init__(
        self,
        name: str,
        steps: Sequence[Any],
        *,
        state: type[BaseModel] | None = None,
        budget: Budget | None = None,
        retry: RetryPolicy | None = None,
        tool_timeout: float | None = None,
        max_tool_result_chars: int | None = DEFAULT_MAX_TOOL_RESULT_CHARS,
    ) -> None:
        if not isinstance(name, str) or not name or "/" in name:
            raise WorkflowDefinitionError(
                f"workflow name must be a non-empty string without '/', got {name!r}"
            )
        self.name = name
        if isinstance(steps, (str, bytes)) or not isinstance(steps, Sequence):
            raise WorkflowDefinitionError(
                f"workflow {name!r}: `steps` must be a list of steps, got {steps!r}"
            )
        self.steps: list[Any] = [adopted(s) for s in steps]
        self.state = state
        self.budget = budget
        self.retry = retry or RetryPolicy()
        try:
            self.tool_timeout = checked_timeout(tool_timeout, f"workflow {name!r}")
        except ValueError as exc:
            raise WorkflowDefinitionError(str(exc).replace("`timeout`", "`tool_timeout`")) from None
        try:
            self.max_tool_result_chars = checked_max_chars(
                max_tool_result_chars, f"workflow {name!r}"
            )
        except ValueError as exc:
            raise WorkflowDefinitionError(str(exc)) from None
        if state is not None and not (isinstance(state, type) and issubclass(state, BaseModel)):
            raise WorkflowDefinitionError(
                f"workflow {name!r}: `state=` takes a pydantic model class, got {state!r}"
            )
        _check_steps(self, self.steps, name, where=f"workflow {name!r}")

    @classmethod
    def of(cls, agent: Any, *, name: str | None = None, gate: Any = None) -> Workflow:
        """A one-step workflow of `agent`, named after it: a thena_nb `Agent`, or an agent
        of another framework (a pydantic-ai `Agent`, an OpenAI Agents SDK `Agent`), whose
        whole run is the step, one turn per model call.

        Args:
            agent: The agent.
            name: The step's (and the workflow's) name when the agent has none.
            gate: Another framework's agent: which tools' calls wait for a `Decision` before
                they run: `True` (all), a list of tool names, or `fn(call) -> bool`. (A
                thena_nb tool is gated with `@tool(gate=...)`.)

        Raises:
            TypeError: `agent` is none of these (the message lists the kinds).
            ImportError: The framework's release is outside the supported range.

        Example:
            >>> from thena_nb import Agent, Workflow
            >>> from thena_nb.models import ScriptedModel
            >>> Workflow.of(Agent("Helper", model=ScriptedModel(["hi"])))
            Workflow('Helper', [Agent('Helper', model='scripted')])
        """
        from thena_nb.core.engine.foreign import KINDS, ForeignAgent

        if isinstance(agent, Agent) and not isinstance(agent, ForeignAgent):
            if gate is not None:
                raise TypeError(
                    "`gate=` is for other frameworks' agents; gate a thena_nb tool with "
                    "`@tool(gate=...)`"
                )
            step: Agent = agent
        else:
            found = (
                None
                if isinstance(agent, ForeignAgent)
                else _portals.foreign_step(agent, name=name, gate=gate)
            )
            if found is None and not isinstance(agent, ForeignAgent):
                raise TypeError(f"`Workflow.of` takes {KINDS}; got {agent!r}")
            step = found if found is not None else agent
        return cls(name or step.name, [step])

    # -- running ------------------------------------------------------------------------

    def session(
        self,
        input: str,
        *,
        state: Any = None,
        replay: Run | None = None,
        live_from: int | None = None,
        run_id: str | None = None,
        store: RunRecorder | Literal[False] | None = None,
        approve: Approver | None = None,
        at_gate: Literal["pause", "wait"] = "pause",
        deps: Any = None,
    ) -> Session:
        """A `Session` paused before the first turn; `await s.step()` or `await s.run()`.

        Args:
            input: The user's message that starts the run.
            state: The initial state object (a new `state()` by default).
            replay: A recorded run whose turns are reused while the requests match.
            live_from: With `replay`, go live from this turn index on.
            run_id: The new run's id (a fresh one by default).
            store: Where each turn is persisted as it finishes: a run store, `False` for
                none, or `None` for the default store (`THENA_NB_STORE`, or a file under the
                user's data directory).
            approve: `fn(pending_call) -> Decision` (sync or async) decides every call a
                tool gate holds (see `thena_nb.Decision`).
            at_gate: Without `approve`, what a gate does: `"pause"` the session before the
                turn's tools (decide with `session.decide`), or `"wait"`: end the run with
                status `"waiting"` (go on with `wf.resume(run_id, decisions=...)`).
        """
        from thena_nb.core.engine.session import Session
        from thena_nb.core.store.base import resolve_store

        source = Replay(replay, live_from=live_from) if replay is not None else None
        recorder = resolve_store(store)
        return Session(
            self,
            _text(input),
            state=state,
            replay=source,
            recorder=recorder,
            run_id=run_id,
            approve=approve,
            at_gate=at_gate,
            deps=deps,
        )

    async def arun(
        self,
        input: str,
        *,
        state: Any = None,
        replay: Run | None = None,
        live_from: int | None = None,
        run_id: str | None = None,
        store: RunRecorder | Literal[False] | None = None,
        approve: Approver | None = None,
        deps: Any = None,
        overwrite: bool = False,
    ) -> Run:
        """Run to the end and return the `Run`; the async form of `run`. Meanwhile the
        cyclic collector runs less often (`core/_collector.py`).

        Raises:
            RunInUse: `run_id` names a run the store holds already (unless `overwrite`), or
                one another writer is running now.
            Exception: Whatever ended the run (a model error after retries, an exception in
                user code), unchanged, with a note naming the step and `exc.run` holding the
                partial run (status `"failed"`).
        """
        import asyncio

        from thena_nb.core.store.base import keep_stored

        s = self.session(
            input,
            state=state,
            replay=replay,
            live_from=live_from,
            run_id=run_id,
            store=store,
            approve=approve,
            at_gate="wait",
            deps=deps,
        )
        # A given run id never replaces a stored run silently: the store's claim refuses it.
        token = keep_stored.set(run_id is not None and not overwrite)
        try:
            with fewer_collections():  # it runs to its end: see `core/_collector.py`
                return await s.run()
        except asyncio.CancelledError as exc:
            # Cancelling the caller cancels the run too; it keeps every finished turn (S28).
            if s.task is not None and not s.task.done():
                s.task.cancel()
                await asyncio.wait([s.task])
            exc.run = s.result  # type: ignore[attr-defined]
            raise
        finally:
            keep_stored.reset(token)

    def run(
        self,
        input: str,
        *,
        state: Any = None,
        replay: Run | None = None,
        live_from: int | None = None,
        run_id: str | None = None,
        store: RunRecorder | Literal[False] | None = None,
        approve: Approver | None = None,
        deps: Any = None,
        overwrite: bool = False,
    ) -> Run:
        """Run to the end and return the `Run` (sync; also works inside Jupyter). Meanwhile
        the cyclic collector runs less often: its thresholds are raised, and put back once
        the run ends (`core/_collector.py`).

        With `replay=run`, recorded turns are reused (no model or tool call) while the new
        run asks the same things; `run.replay_diverged_at` tells where it went live.

        A tool gate (`@tool(gate=...)`) asks `approve(pending_call)` for a `Decision`; with
        no `approve`, the run ends at the gate with status `"waiting"` and `run.pending`,
        and `wf.resume(run.run_id, decisions={call_id: Decision...})` goes on.

        A stored `run_id` is refused (`RunInUse`); `overwrite=True` replaces that run.

        Example:
            >>> from thena_nb import Agent, Decision, Workflow, loop, tool, until_answered
            >>> from thena_nb.models import FunctionModel, reply
            >>> from thena_nb.store import MemoryRunStore
            >>> pay = tool(lambda amount: f"paid {amount}", name="pay",
            ...            gate=lambda call: call.arguments["amount"] > 100)
            >>> def clerk(request):  # pays 500, then answers once a tool result is back
            ...     answered = request.messages[-1].role == "tool"
            ...     return "Done." if answered else reply.tool("pay", amount=500)
            >>> agent = Agent("A", model=FunctionModel(clerk), tools=[pay])
            >>> wf = Workflow("pay", [loop(steps=[agent], until=until_answered)])
            >>> store = MemoryRunStore()
            >>> run = wf.run("pay 500", store=store)
            >>> run.status, [p.call.arguments for p in run.pending]
            ('waiting', [{'amount': 500}])
            >>> done = wf.resume(run.run_id, store=store,
            ...                  decisions={run.pending[0].call.id: Decision.reject("too much")})
            >>> done.status, done.turns[0].tool_calls[0].error, done.output
            ('finished', "Error: tool 'pay' was not run: too much", 'Done.')
        """
        from thena_nb.core.engine._aio import run_sync

        given = {"run_id": run_id, "store": store, "approve": approve, "deps": deps}
        return run_sync(
            self.arun(
                input, state=state, replay=replay, live_from=live_from, overwrite=overwrite, **given
            )
        )

    def resume(
        self,
        run_id: str,
        *,
        store: RunStore | None = None,
        decisions: Mapping[str, Decision] | None = None,
        approve: Approver | None = None,
    ) -> Run:
        """Resume a stored run from its last finished turn.

        Finished turns are reused (no model call, no tool call); the rest runs live, under
        the same run id. Works for runs ended by an error, a stop, a kernel interrupt or a
        killed process.

        Args:
            run_id: The stored run's id.
            store: The store holding the run, where the resumed run is kept too; the
                default store when not given.
            decisions: For a `"waiting"` run: a `Decision` for each of `run.pending`, by
                call id. The waiting turn's model reply is reused and its tools run with
                these decisions.
            approve: `fn(pending_call) -> Decision` for gated calls without a decision.

        Raises:
            StoreError: The run is not in the store, or there is no store.
            ValueError: The run was made by another workflow.
            GateError: A decision names no pending call, a pending call has no decision,
                an edit does not fit its tool, or `decisions` for a run that is not waiting.
        """
        from thena_nb.core._fork import aresume
        from thena_nb.core.engine._aio import run_sync

        return run_sync(aresume(self, run_id, store=store, decisions=decisions, approve=approve))

    async def aresume(
        self,
        run_id: str,
        *,
        store: RunStore | None = None,
        decisions: Mapping[str, Decision] | None = None,
        approve: Approver | None = None,
    ) -> Run:
        """The async form of `resume`."""
        from thena_nb.core._fork import aresume

        return await aresume(self, run_id, store=store, decisions=decisions, approve=approve)

    def _fork(
        self,
        run: Run,
        at: int,
        *,
        changes: Changes | None = None,
        store: RunStore | Literal[False] | None = None,
        **edits: Any,
    ) -> Run:
        """`run.fork(...)` with this workflow: see `Run.fork` (`edits`: `reply`,
        `tool_results`, `inject`)."""
        from thena_nb.core._fork import afork
        from thena_nb.core.engine._aio import run_sync

        return run_sync(afork(self, run, at, changes=changes, store=store, **edits))

    def _continue(
        self,
        run: Run,
        text: str,
        *,
        store: RunStore | Literal[False] | None = None,
        replay: Run | None = None,
    ) -> Run:
        """`run.continue_with(...)` with this workflow: see `Run.continue_with`."""
        from thena_nb.core._fork import acontinue
        from thena_nb.core.engine._aio import run_sync

        return run_sync(acontinue(self, run, text, store=store, replay=replay))

    def map(
        self,
        inputs: Iterable[Any],
        *,
        variants: Mapping[str, Mapping[str, Mapping[str, Any]]] | None = None,
        concurrency: int = 8,
        backend: Literal["local", "ray"] = "local",
        store: Any = None,
        progress: bool = True,
        ray_address: str | None = None,
        scorers: Sequence[Any] | Mapping[str, Any] | None = None,
        repeats: int = 1,
        run_timeout: float | None = None,
        keep_runs: bool | None = None,
        reuse: bool = True,
        approve: Approver | None = None,
    ) -> _portals.Experiment:
        """Run every case under every variant, score the runs, and collect them in an
        `Experiment`.

        Args:
            inputs: The cases, one run each per variant and repeat: strings, `Case(input,
                expected=..., name=..., metadata=...)`s, or a pydantic-evals `Dataset`.
            variants: Variant name to changes, e.g. `{"brief": {"Executor": {"system":
                "Be brief."}}}`; `thena_nb.grid(...)` builds the cross product of several.
            concurrency: Runs in flight at once.
            backend: `"local"` (asyncio) or `"ray"` (Ray workers, each running many runs).
            store: Where runs are kept; finished runs found there are reused for free.
            progress: Show a progress bar.
            ray_address: The Ray cluster to use (a local one by default).
            scorers: `thena_nb.scorers` or any `fn(run, case) -> bool | float | Score`, as
                a list or a dict of column name to scorer: one `exp.frame()` column each.
            repeats: Runs per (case, variant), each an independent sample stored as its
                own run; `exp.compare()` then gives pass@k.
            run_timeout: Seconds a run may take; one still going then is a `failed` row.
            keep_runs: Keep the runs in memory; by default only without a store (with one,
                `exp.runs` loads them from it and the experiment keeps a summary per run).
            reuse: `False` runs every run again instead of taking the stored one
                (`exp.frame()`'s `reused` and `changed` say why a run ran).
            approve: `fn(pending_call) -> Decision` (sync or async), as `wf.run` takes it:
                decides every call a tool gate holds, in every run, so no run waits for a
                person. Without it, a run that meets a gate is a `"waiting"` row. Runs are
                reused only when made with the same `approve` (by its code).

        Example:
            >>> from thena_nb import Agent, Case, Workflow
            >>> from thena_nb.models import ScriptedModel
            >>> from thena_nb.scorers import equals
            >>> wf = Workflow("demo", [Agent("A", model=ScriptedModel(["4"]))])
            >>> exp = wf.map([Case("2+2?", expected="4")], scorers=[equals()], repeats=2,
            ...              store=False, progress=False)
            >>> exp.frame()["equals"].tolist(), float(exp.compare().loc["base", "equals_pass@2"])
            ([True, True], 1.0)
        """
        return _portals.run_experiment(
            self, inputs, variants=variants, concurrency=concurrency, backend=backend,
            store=store, progress=progress, ray_address=ray_address, scorers=scorers,
            repeats=repeats, run_timeout=run_timeout, keep_runs=keep_runs, reuse=reuse,
            approve=approve,
        )  # fmt: skip

    def stepper(self, input: str, *, state: Any = None) -> _portals.Stepper:
        """A `Stepper` widget over a new session of this workflow (needs ipywidgets)."""
        return _portals.stepper(self.session(input, state=state))

    # -- display ------------------------------------------------------------------------

    def _repr_html_(self) -> str:
        return _html.workflow_html(self)

    def __repr__(self) -> str:
        steps = ", ".join(_describe(s) for s in self.steps)
        extra = f", state={self.state.__name__}" if self.state is not None else ""
        return f"Workflow({self.name!r}, [{steps}]{extra})"


def adopted(step: Any) -> Any:
    """`step`, with every agent of another framework in it made a step (`thena_nb.frameworks`),
    inside `parallel` and `loop` blocks too.

    Example:
        >>> adopted(print) is print
        True
    """
    if isinstance(step, ParallelStep | LoopStep):
        inner = tuple(adopted(s) for s in step.steps)
        if all(a is b for a, b in zip(inner, step.steps, strict=True)):
            return step
        return dataclasses.replace(step, steps=inner)
    if isinstance(step, _PLAIN) or type(step).__module__.startswith("thena_nb"):
        return step
    found = _portals.foreign_step(step)
    return step if found is None else found


_PLAIN = (types.FunctionType, types.MethodType, types.BuiltinFunctionType, functools.partial)
"""Steps that are never another framework's agent (plain functions), told apart first."""


def _describe(step: Any) -> str:
    if isinstance(step, (ParallelStep, LoopStep, Agent)):
        return repr(step)
    return step_name(step)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else str(value)


def _check_steps(wf: Workflow, steps: Sequence[Any], parent: str, *, where: str) -> None:
    if not steps:
        raise WorkflowDefinitionError(f"{where}: has no steps; give it at least one step")
    for i, step in enumerate(steps):
        path = step_path(parent, i, step) if _is_step(step) else f"{parent}/{i}"
        _check_step(wf, step, path)


def _is_step(step: Any) -> bool:
    return isinstance(step, (Agent, ParallelStep, LoopStep)) or (
        callable(step) and not isinstance(step, type)
    )


MAX_NESTING = 40
"""How deeply `loop` and `parallel` blocks may nest. A run's report nests as deep as its
steps, and a store must be able to read back every run it keeps: deeper definitions are
refused up front rather than stored and found unreadable later."""


def _check_step(wf: Workflow, step: Any, path: str) -> None:
    if isinstance(step, (ParallelStep, LoopStep)) and path.count("/") > MAX_NESTING:
        raise WorkflowDefinitionError(
            f"{path[:60]}…: `loop` and `parallel` blocks nest more than {MAX_NESTING} deep; "
            f"a run this deep could be stored but not read back. Flatten the workflow (a "
            f"loop of a few steps, or a function step) instead"
        )
    if isinstance(step, Agent):
        _check_agent(wf, step, path)
    elif isinstance(step, ParallelStep):
        _check_steps(wf, step.steps, path, where=f"parallel block {path!r}")
        names = [s.name for s in step.steps if isinstance(s, Agent)]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise WorkflowDefinitionError(
                f"parallel block {path!r}: agent {dupes[0]!r} appears twice; branches write "
                f"under their agent's name, so give each branch its own agent"
            )
    elif isinstance(step, LoopStep):
        _check_loop(wf, step, path)
    elif _is_step(step):
        _check_function(step, path)
    else:
        raise WorkflowDefinitionError(
            f"{path!r}: {step!r} is not a step; a step is an `Agent`, `parallel([...])`, "
            f"`loop(...)` or a function `fn(ctx)`"
        )


def _check_agent(wf: Workflow, agent: Agent, path: str) -> None:
    model = agent.model
    if model is None or not callable(getattr(model, "respond", None)):
        raise WorkflowDefinitionError(
            f"agent {path!r} has no model (got {model!r}); pass `model=` to `Agent`, "
            f"e.g. `ScriptedModel([...])` offline or `AnthropicModel(...)`"
        )
    if agent.output_field is not None:
        if wf.state is None:
            raise WorkflowDefinitionError(
                f"agent {path!r} has `output_field={agent.output_field!r}`, but workflow "
                f"{wf.name!r} has no `state=`. Pass a state class with that field."
            )
        if agent.output_field not in wf.state.model_fields:
            raise WorkflowDefinitionError(
                f"agent {path!r}: `output_field={agent.output_field!r}` is not a field of "
                f"{wf.state.__name__}; its fields are {sorted(wf.state.model_fields)}"
            )


def _check_loop(wf: Workflow, step: LoopStep, path: str) -> None:
    _check_steps(wf, step.steps, path, where=f"loop {path!r}")
    for part in condition_parts(step.until):
        required, accepted = condition_arity(part)
        label = getattr(part, "name", None) or getattr(part, "__name__", repr(part))
        _check_not_async(part, f"loop {path!r}: `until` ({label})")
        if required > 2 or accepted == 0:
            raise WorkflowDefinitionError(
                f"loop {path!r}: `until` ({label}) must take `ctx` or `ctx, state`; "
                f"it takes {required} required parameters"
            )
        if required == 2 and wf.state is None:
            # S9: caught from the function's arity before the run starts.
            raise WorkflowDefinitionError(
                f"loop {path!r}: `until` ({label}) takes a state parameter, but workflow "
                f"{wf.name!r} has no `state=`. Pass `state=YourState` to `Workflow`, or drop "
                f"the parameter."
            )
    for hook_name in ("on_fail", "on_exhausted"):
        hook: Callable[..., Any] | None = getattr(step, hook_name)
        if hook is not None:
            _check_not_async(hook, f"loop {path!r}: `{hook_name}`")
            required, accepted = condition_arity(hook)
            if required > 2 or accepted < 2:
                raise WorkflowDefinitionError(
                    f"loop {path!r}: `{hook_name}` is called with two arguments "
                    f"(`ctx, {'info' if hook_name == 'on_fail' else 'iterations'}`); "
                    f"{getattr(hook, '__name__', hook)!r} takes {accepted}"
                )


def _check_not_async(fn: Any, what: str) -> None:
    """Stop conditions and loop hooks are plain functions: an `async def` would return a
    coroutine, which is always true (and never run)."""
    inner = getattr(fn, "_fn", None)  # a `Condition` wraps the function it was made from
    candidates = (fn, inner, type(fn).__call__ if not inspect.isfunction(fn) else None)
    if any(c is not None and inspect.iscoroutinefunction(c) for c in candidates):
        raise WorkflowDefinitionError(
            f"{what} is an `async def`; stop conditions and loop hooks are checked between "
            f"turns and must answer at once. Make it a plain `def` (do async work in a "
            f"function step or a tool and keep its result in the state)"
        )


def _check_function(fn: Callable[..., Any], path: str) -> None:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    try:
        sig.bind(None)
    except TypeError:
        raise WorkflowDefinitionError(
            f"function step {path!r} must take one argument, `ctx`; its signature is "
            f"{getattr(fn, '__name__', 'fn')}{sig}"
        ) from None
