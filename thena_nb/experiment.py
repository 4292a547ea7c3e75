"""Experiments: one workflow over many inputs and variants, summarised per variant.

`run_experiment(wf, inputs, variants=...)` runs every input under every variant (a variant is
a changes dict, see `grid`), at most `concurrency` runs at a time, on this machine
(`backend="local"`) or as Ray tasks (`backend="ray"`). Every run goes to a run store under an
id derived from the workflow, the input and the variant, so running the same experiment
again reuses the runs that finished (no model call) and runs only the rest.

Example:
    >>> from thena_nb import Agent, Workflow, grid, loop, until_answered
    >>> from thena_nb.models import ScriptedModel
    >>> agent = Agent("Executor", model=ScriptedModel(["done"]))
    >>> wf = Workflow("demo", [loop(steps=[agent], until=until_answered)])
    >>> exp = run_experiment(wf, ["a", "b"], variants=grid(
    ...     prompt={"brief": {"Executor": {"system": "Be brief."}}, "plain": {}}),
    ...     store=False, progress=False)
    >>> exp
    Experiment('demo', runs=4/4, inputs=2, variants=['prompt=brief', 'prompt=plain'])
    >>> [run.status for run in exp.runs]
    ['finished', 'finished', 'finished', 'finished']
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from thena_nb.core import _html
from thena_nb.core._aio import run_sync
from thena_nb.core.agent import Agent
from thena_nb.core.changes import Changes, apply_changes, grid
from thena_nb.core.errors import StoreError, TransientModelError
from thena_nb.core.model import ModelRequest, Reply
from thena_nb.core.run import Run
from thena_nb.core.steps import LoopStep, ParallelStep
from thena_nb.core.store.base import records_of, resolve_store
from thena_nb.core.workflow import Workflow

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "BASE_VARIANT",
    "Changes",
    "Experiment",
    "arun_experiment",
    "grid",
    "run_experiment",
]

Backend = Literal["local", "ray"]

BASE_VARIANT = "base"
"""The variant name of an experiment run without `variants`."""

_REUSABLE = ("finished", "budget", "stopped")
"""Statuses of stored runs that a re-run takes as they are; failed runs run again."""


# -- variants ----------------------------------------------------------------------------


def _rebuilt(workflow: Workflow, steps: list[Any]) -> Workflow:
    return Workflow(
        workflow.name, steps, state=workflow.state, budget=workflow.budget, retry=workflow.retry
    )


def _map_agents(workflow: Workflow, fn: Callable[[Agent], Agent]) -> Workflow:
    """A copy of `workflow` with every agent replaced by `fn(agent)` (once per agent)."""
    memo: dict[int, Agent] = {}

    def walk(step: Any) -> Any:
        if isinstance(step, Agent):
            if id(step) not in memo:
                memo[id(step)] = fn(step)
            return memo[id(step)]
        if isinstance(step, LoopStep | ParallelStep):
            return dataclasses.replace(step, steps=tuple(walk(s) for s in step.steps))
        return step

    return _rebuilt(workflow, [walk(s) for s in workflow.steps])


# -- run ids -----------------------------------------------------------------------------


def _fingerprint(workflow: Workflow) -> str:
    """What a run of `workflow` depends on besides its input: agents, loops, functions."""
    h = hashlib.blake2b(digest_size=16)
    h.update(repr((workflow.name, _label(workflow.state))).encode())
    if workflow.budget is not None:
        h.update(workflow.budget.model_dump_json().encode())

    def walk(step: Any) -> None:
        if isinstance(step, Agent):
            h.update(step.key.encode())
            h.update(repr((step.output_field, step.rescue, step.parallel_tools)).encode())
        elif isinstance(step, LoopStep):
            h.update(
                repr(
                    (
                        "loop",
                        _label(step.until),
                        step.max_iterations,
                        step.max_fails,
                        _label(step.on_fail),
                        _label(step.on_exhausted),
                    )
                ).encode()
            )
        elif isinstance(step, ParallelStep):
            h.update(b"parallel")
        else:
            h.update(repr(("function", _label(step))).encode())
        for child in getattr(step, "steps", ()):
            walk(child)
        h.update(b"\x1d")

    for step in workflow.steps:
        walk(step)
    return h.hexdigest()


def _label(fn: Any) -> str:
    if fn is None:
        return ""
    name = getattr(fn, "name", None)
    if isinstance(name, str):
        return name
    return f"{getattr(fn, '__module__', '')}.{getattr(fn, '__qualname__', repr(fn))}"


def _run_id(workflow_name: str, variant: str, fingerprint: str, input: str, occurrence: int) -> str:
    """The same run of the same experiment gets the same id, in any process."""
    key = f"{workflow_name}\x1f{variant}\x1f{fingerprint}\x1f{occurrence}\x1f{input}"
    return hashlib.blake2b(key.encode(), digest_size=6).hexdigest()


@dataclasses.dataclass(frozen=True)
class _Job:
    slot: int
    input: str
    variant: str
    run_id: str


# -- the experiment ----------------------------------------------------------------------


class Experiment:
    """The runs of one workflow over inputs and variants, and their summary.

    `runs` lists the runs that ended, in (input, variant) order; a cancelled experiment keeps
    the runs that finished before it was cancelled (`cancelled` is then true).

    Attributes:
        workflow_name: The workflow's name.
        inputs: The inputs, in order.
        variants: Variant name to its changes (`{"base": {}}` without variants).
        reused: How many runs were taken from the store instead of run again.
        slowdowns: How many times a rate limit made every run wait.
        cancelled: The experiment was cancelled before every run ended.
        wall_s: Seconds the whole experiment took.
    """

    def __init__(
        self, workflow_name: str, inputs: Sequence[str], variants: Mapping[str, Changes]
    ) -> None:
        self.workflow_name = workflow_name
        self.inputs = list(inputs)
        self.variants = dict(variants)
        self.reused = 0
        self.slowdowns = 0
        self.cancelled = False
        self.wall_s = 0.0
        self._slots: list[Run | None] = [None] * (len(self.inputs) * len(self.variants))
        self._keys: list[tuple[str, str]] = [(i, v) for i in self.inputs for v in self.variants]

    @property
    def runs(self) -> list[Run]:
        """The runs that ended, in (input, variant) order."""
        return [run for run in self._slots if run is not None]

    def _entries(self) -> list[tuple[str, str, Run]]:
        return [
            (key[0], key[1], run)
            for key, run in zip(self._keys, self._slots, strict=True)
            if run is not None
        ]

    def frame(self) -> pd.DataFrame:
        """The runs as a DataFrame, one row per run, in (input, variant) order.

        Columns: `input`, `variant`, `status`, `stop_reasons`, `turns`, `tool_calls`,
        `rescued`, `failures`, `input_tokens`, `output_tokens`, `wall_s`. `stop_reasons`
        joins each loop's stop reason (pre-order) with commas; `rescued` is the share of the
        run's tool calls that were rescued from text (missing when it made none).
        """
        import pandas as pd

        rows = [_run_row(i, v, run) for i, v, run in self._entries()]
        frame = pd.DataFrame(rows, columns=list(_FRAME_DTYPES))
        return frame.astype(_FRAME_DTYPES)

    def compare(self) -> pd.DataFrame:
        """A summary per variant, one row each, in variant order.

        Columns: `runs`, `statuses` and `stop_reasons` (counts, e.g. `"until 2, exhausted
        1"`), `mean_turns`, `mean_tool_calls`, `rescued` (share of all tool calls),
        `failures` (failed tool calls), `input_tokens`, `output_tokens` (totals),
        `mean_wall_s`.
        """
        import pandas as pd

        rows = self._summary()
        frame = pd.DataFrame(rows, columns=["variant", *_COMPARE_COLUMNS])
        return frame.astype(_COMPARE_DTYPES).set_index("variant")

    def _summary(self) -> list[dict[str, Any]]:
        by_variant: dict[str, list[dict[str, Any]]] = {v: [] for v in self.variants}
        for i, v, run in self._entries():
            by_variant[v].append(_run_row(i, v, run))
        return [_variant_row(v, rows) for v, rows in by_variant.items()]

    def _repr_html_(self) -> str:
        esc = _html.escape
        head = (
            f"experiment <b>{esc(self.workflow_name)}</b> · {len(self.runs)}/"
            f"{len(self._slots)} runs · {len(self.inputs)} inputs · "
            f"{len(self.variants)} variants · {self.wall_s:.2f} s"
        )
        if self.reused:
            head += f" · {self.reused} reused from the store"
        if self.slowdowns:
            head += f" · {self.slowdowns} rate-limit slowdowns"
        if self.cancelled:
            head += " · <b>cancelled</b>"
        cells = "".join(f"<th>{esc(c)}</th>" for c in ("variant", *_COMPARE_COLUMNS))
        body = []
        for row in self._summary():
            tds = "".join(
                f"<td style='text-align:left'>{esc(_cell(row[c]))}</td>"
                for c in ("variant", *_COMPARE_COLUMNS)
            )
            body.append(f"<tr>{tds}</tr>")
        return (
            f'<div class="thena-experiment"><div>{head}</div>'
            f"<table><thead><tr>{cells}</tr></thead><tbody>{''.join(body)}</tbody></table></div>"
        )

    def __repr__(self) -> str:
        extra = ", cancelled" if self.cancelled else ""
        return (
            f"Experiment({self.workflow_name!r}, runs={len(self.runs)}/{len(self._slots)}, "
            f"inputs={len(self.inputs)}, variants={list(self.variants)!r}{extra})"
        )


_FRAME_DTYPES: dict[str, str] = {
    "input": "string",
    "variant": "string",
    "status": "string",
    "stop_reasons": "string",
    "turns": "int64",
    "tool_calls": "int64",
    "rescued": "float64",
    "failures": "int64",
    "input_tokens": "int64",
    "output_tokens": "int64",
    "wall_s": "float64",
}

_COMPARE_DTYPES: dict[str, str] = {
    "variant": "string",
    "runs": "int64",
    "statuses": "string",
    "stop_reasons": "string",
    "mean_turns": "float64",
    "mean_tool_calls": "float64",
    "rescued": "float64",
    "failures": "int64",
    "input_tokens": "int64",
    "output_tokens": "int64",
    "mean_wall_s": "float64",
}

_COMPARE_COLUMNS = (
    "runs",
    "statuses",
    "stop_reasons",
    "mean_turns",
    "mean_tool_calls",
    "rescued",
    "failures",
    "input_tokens",
    "output_tokens",
    "mean_wall_s",
)


def _run_row(input: str, variant: str, run: Run) -> dict[str, Any]:
    calls = [c for t in run.turns for c in t.tool_calls]
    reasons = [n.stop_reason for n in run.loops]
    wall = (run.finished_at - run.started_at).total_seconds() if run.finished_at else None
    return {
        "input": input,
        "variant": variant,
        "status": run.status,
        "stop_reasons": ",".join(r or "error" for r in reasons) if reasons else None,
        "turns": len(run.turns),
        "tool_calls": len(calls),
        "rescued": sum(c.source == "rescued" for c in calls) / len(calls) if calls else None,
        "failures": sum(c.ok is False for c in calls),
        "input_tokens": run.usage.input_tokens,
        "output_tokens": run.usage.output_tokens,
        "wall_s": wall,
    }


def _variant_row(variant: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(rows)
    calls = sum(r["tool_calls"] for r in rows)
    rescued = sum((r["rescued"] or 0.0) * r["tool_calls"] for r in rows)
    walls = [r["wall_s"] for r in rows if r["wall_s"] is not None]
    return {
        "variant": variant,
        "runs": n,
        "statuses": _counts(r["status"] for r in rows),
        "stop_reasons": _counts(r["stop_reasons"] for r in rows if r["stop_reasons"]),
        "mean_turns": sum(r["turns"] for r in rows) / n if n else None,
        "mean_tool_calls": calls / n if n else None,
        "rescued": rescued / calls if calls else None,
        "failures": sum(r["failures"] for r in rows),
        "input_tokens": sum(r["input_tokens"] for r in rows),
        "output_tokens": sum(r["output_tokens"] for r in rows),
        "mean_wall_s": sum(walls) / len(walls) if walls else None,
    }


def _counts(values: Iterable[str]) -> str:
    return ", ".join(f"{k} {n}" for k, n in Counter(values).most_common())


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


# -- rate limits -------------------------------------------------------------------------


class _Gate:
    """Shared by every run of an experiment: after a rate limit, nobody calls until it opens."""

    def __init__(self, fallback_wait: float) -> None:
        self.fallback_wait = fallback_wait
        self.opens_at = 0.0
        self.slowdowns = 0

    async def wait(self) -> None:
        while (delay := self.opens_at - time.monotonic()) > 0:
            await asyncio.sleep(delay)

    def close_for(self, seconds: float | None) -> None:
        until = time.monotonic() + (self.fallback_wait if seconds is None else seconds)
        if until > self.opens_at:
            if self.opens_at <= time.monotonic():
                self.slowdowns += 1
            self.opens_at = until


class _GatedModel:
    """A model that waits at the experiment's gate before each call and closes it on a rate
    limit. Its `name` is the wrapped model's, so request keys (and replays) are unchanged."""

    def __init__(self, model: Any, gate: _Gate) -> None:
        self.model = model
        self.name = getattr(model, "name", type(model).__name__)
        self._gate = gate

    async def respond(self, request: ModelRequest) -> Reply:
        await self._gate.wait()
        try:
            reply: Reply = await self.model.respond(request)
        except TransientModelError as exc:
            self._gate.close_for(exc.retry_after)
            raise
        return reply

    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)

    def __repr__(self) -> str:
        return repr(self.model)


def _gated(workflow: Workflow, gate: _Gate) -> Workflow:
    wrapped: dict[int, _GatedModel] = {}

    def wrap(agent: Agent) -> Agent:
        model = agent.model
        if id(model) not in wrapped:
            wrapped[id(model)] = _GatedModel(model, gate)
        return agent.replace(model=wrapped[id(model)])

    return _map_agents(workflow, wrap)


# -- running -----------------------------------------------------------------------------


def run_experiment(
    workflow: Workflow,
    inputs: Iterable[Any],
    *,
    variants: Mapping[str, Changes] | None = None,
    concurrency: int = 8,
    backend: Backend = "local",
    store: Any = None,
    progress: bool = True,
    ray_address: str | None = None,
) -> Experiment:
    """Run `workflow` on every input under every variant and collect the runs.

    Args:
        workflow: The workflow to run.
        inputs: The inputs (non-strings are converted with `str`).
        variants: Variant name to changes dict (see `grid`); `None` runs the workflow as it
            is, as the variant `"base"`.
        concurrency: At most this many runs at a time.
        backend: `"local"` (asyncio in this process) or `"ray"` (one Ray task per run;
            needs `pip install thena_nb[ray]`).
        store: The run store every run is written to: a store, `None` for the default store,
            or `False` for none (then nothing is reused either).
        progress: Show a progress bar (terminal or notebook widget).
        ray_address: With `backend="ray"`, the cluster to connect to when Ray is not
            initialised yet (`None` starts Ray on this machine).

    Returns:
        The `Experiment`.

    Raises:
        ValueError: Bad `variants` or `concurrency` (before any run starts).
        KeyboardInterrupt: The experiment was interrupted; `exc.experiment` holds the runs
            that finished (they are in the store too, so running again reuses them).
    """
    exp, plan = _plan(workflow, inputs, variants, concurrency, backend)
    try:
        return run_sync(
            _execute(exp, plan, concurrency=concurrency, backend=backend, store=store,
                     progress=progress, ray_address=ray_address)
        )  # fmt: skip
    except KeyboardInterrupt as exc:
        exp.cancelled = True
        exc.experiment = exp  # type: ignore[attr-defined]
        raise


async def arun_experiment(
    workflow: Workflow,
    inputs: Iterable[Any],
    *,
    variants: Mapping[str, Changes] | None = None,
    concurrency: int = 8,
    backend: Backend = "local",
    store: Any = None,
    progress: bool = True,
    ray_address: str | None = None,
) -> Experiment:
    """The async form of `run_experiment`.

    Raises:
        asyncio.CancelledError: The task was cancelled; the runs in flight are cancelled and
            `exc.experiment` holds the runs that finished.
    """
    exp, plan = _plan(workflow, inputs, variants, concurrency, backend)
    return await _execute(
        exp, plan, concurrency=concurrency, backend=backend, store=store, progress=progress,
        ray_address=ray_address,
    )  # fmt: skip


@dataclasses.dataclass
class _Plan:
    workflow: Workflow
    variant_workflows: dict[str, Workflow]
    jobs: list[_Job]


def _plan(
    workflow: Workflow,
    inputs: Iterable[Any],
    variants: Mapping[str, Changes] | None,
    concurrency: int,
    backend: str,
) -> tuple[Experiment, _Plan]:
    if isinstance(inputs, str | bytes):
        raise TypeError(f"`inputs` is a list of inputs, got the single input {inputs!r}")
    if not isinstance(concurrency, int) or concurrency < 1:
        raise ValueError(f"`concurrency` must be a whole number >= 1, got {concurrency!r}")
    if backend not in ("local", "ray"):
        raise ValueError(f"`backend` must be 'local' or 'ray', got {backend!r}")
    texts = [x if isinstance(x, str) else str(x) for x in inputs]
    chosen: dict[str, Changes] = dict(variants) if variants else {BASE_VARIANT: {}}
    # Every variant is built (and checked) before anything runs.
    built = {name: apply_changes(workflow, changes) for name, changes in chosen.items()}
    prints = {name: _fingerprint(wf) for name, wf in built.items()}
    seen: Counter[str] = Counter()
    jobs: list[_Job] = []
    for text in texts:
        occurrence = seen[text]
        seen[text] += 1
        for name in chosen:
            run_id = _run_id(workflow.name, name, prints[name], text, occurrence)
            jobs.append(_Job(len(jobs), text, name, run_id))
    return Experiment(workflow.name, texts, chosen), _Plan(workflow, built, jobs)


async def _execute(
    exp: Experiment,
    plan: _Plan,
    *,
    concurrency: int,
    backend: str,
    store: Any,
    progress: bool,
    ray_address: str | None,
) -> Experiment:
    started = time.perf_counter()
    store = resolve_store(store)
    bar = _progress_bar(len(plan.jobs), progress, plan.workflow.name)

    def done(job: _Job, run: Run) -> None:
        run.workflow = plan.variant_workflows[job.variant]
        exp._slots[job.slot] = run
        bar.update(1)

    try:
        todo = await _reuse_finished(exp, plan.jobs, store, done)
        if backend == "ray":
            await _run_ray(plan, todo, done, concurrency=concurrency, store=store,
                           address=ray_address)  # fmt: skip
        else:
            await _run_local(exp, plan, todo, done, concurrency=concurrency, store=store)
    except (asyncio.CancelledError, KeyboardInterrupt) as exc:
        exp.cancelled = True
        setattr(exc, "experiment", exp)  # noqa: B010 - read back as `exc.experiment`
        raise
    finally:
        exp.wall_s = time.perf_counter() - started
        bar.close()
    return exp


def _progress_bar(total: int, enabled: bool, name: str) -> Any:
    if not enabled:
        return _NoBar()
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=name, unit="run", dynamic_ncols=True)


class _NoBar:
    def update(self, n: int = 1) -> None:
        pass

    def close(self) -> None:
        pass


# -- the store ---------------------------------------------------------------------------


async def _reuse_finished(
    exp: Experiment, jobs: list[_Job], store: Any, done: Callable[[_Job, Run], None]
) -> list[_Job]:
    """Take runs the store already finished; return the jobs still to run."""
    if store is None or not jobs:
        return list(jobs)
    found = await asyncio.to_thread(_load_finished, store, [j.run_id for j in jobs])
    todo = []
    for job in jobs:
        run = found.get(job.run_id)
        if run is None:
            todo.append(job)
        else:
            exp.reused += 1
            done(job, run)
    return todo


def _load_finished(store: Any, run_ids: list[str]) -> dict[str, Run]:
    wanted = set(run_ids)
    ready = [
        row["run_id"]
        for row in store.list_runs()
        if row["run_id"] in wanted and row["status"] in _REUSABLE
    ]
    out: dict[str, Run] = {}
    for run_id in ready:
        try:
            out[run_id] = store.load(run_id)
        except StoreError:
            continue  # unreadable: run it again
    return out


async def _save(store: Any, run: Run) -> None:
    """Write a run made elsewhere (a Ray worker) to the store, turn by turn."""
    if store is None:
        return
    await store.run_started(run)
    for record in records_of(run):
        await store.turn_recorded(run, record)
    await store.run_finished(run)


# -- local backend -----------------------------------------------------------------------


async def _run_local(
    exp: Experiment,
    plan: _Plan,
    todo: list[_Job],
    done: Callable[[_Job, Run], None],
    *,
    concurrency: int,
    store: Any,
) -> None:
    gate = _Gate(plan.workflow.retry.initial_delay)
    gated = {name: _gated(wf, gate) for name, wf in plan.variant_workflows.items()}
    queue = iter(todo)

    async def worker() -> None:
        for job in queue:
            run = await _run_live(gated[job.variant], job, store)
            exp.slowdowns = gate.slowdowns
            done(job, run)

    await _all(worker() for _ in range(min(concurrency, len(todo))))
    exp.slowdowns = gate.slowdowns


async def _run_live(workflow: Workflow, job: _Job, store: Any) -> Run:
    """One run in this process; cancelling it cancels the session's own task too."""
    s = workflow.session(job.input, run_id=job.run_id, store=False if store is None else store)
    try:
        return await _finish_run(s.run())
    except asyncio.CancelledError:
        # The session advances in a task of its own; stop it, or it would go on calling
        # the model after the experiment was cancelled. It records the run as failed.
        if s.task is not None and not s.task.done():
            s.task.cancel()
            await asyncio.wait([s.task])
        raise


async def _finish_run(pending: Awaitable[Run]) -> Run:
    """The run, also when it failed (the partial run rides on the exception)."""
    try:
        return await pending
    except Exception as exc:
        run = getattr(exc, "run", None)
        if not isinstance(run, Run):
            raise
        return run


async def _all(coros: Iterable[Awaitable[None]]) -> None:
    """Run workers together; if one raises or we are cancelled, cancel and await the rest."""
    tasks = [asyncio.ensure_future(c) for c in coros]
    try:
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


# -- Ray backend -------------------------------------------------------------------------


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ImportError(
            "backend='ray' needs Ray; install it with `pip install 'thena_nb[ray]'`"
        ) from None
    return ray


def _run_in_worker(workflow: Workflow, input: str, run_id: str) -> str:
    """The Ray task: one run, returned as JSON (the store write happens on the driver)."""
    run = asyncio.run(_finish_run(workflow.arun(input, run_id=run_id, store=False)))
    return run.to_json()


_remote_run: Any = None


async def _run_ray(
    plan: _Plan,
    todo: list[_Job],
    done: Callable[[_Job, Run], None],
    *,
    concurrency: int,
    store: Any,
    address: str | None,
) -> None:
    global _remote_run
    if not todo:
        return
    ray = _import_ray()
    if not ray.is_initialized():
        ray.init(address=address, ignore_reinit_error=True)
    if _remote_run is None:
        _remote_run = ray.remote(_run_in_worker)
    refs = {name: ray.put(wf) for name, wf in plan.variant_workflows.items()}
    queue = iter(todo)

    async def worker() -> None:
        for job in queue:
            ref = _remote_run.remote(refs[job.variant], job.input, job.run_id)
            try:
                text = await ref
            except asyncio.CancelledError:
                ray.cancel(ref, force=True)
                raise
            wf = plan.variant_workflows[job.variant]
            run = Run.from_json(text, state_type=wf.state)
            await _save(store, run)
            done(job, run)

    await _all(worker() for _ in range(min(concurrency, len(todo))))
