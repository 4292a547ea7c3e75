"""`run_experiment` and `arun_experiment`: plan the jobs, reuse what the store has, run the rest."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from thena_nb.core._aio import run_sync
from thena_nb.core.changes import Changes
from thena_nb.core.run import Run
from thena_nb.core.store.base import resolve_store
from thena_nb.core.workflow import Workflow
from thena_nb.experiments._backends import run_local, run_ray
from thena_nb.experiments._gate import Gates
from thena_nb.experiments._plan import Backend, Job, Plan, reuse_finished
from thena_nb.experiments._result import Experiment
from thena_nb.experiments._scorers import Scorer
from thena_nb.experiments._scoring import named_scorers

__all__ = ["arun_experiment", "run_experiment"]


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
    scorers: Sequence[Scorer] | Mapping[str, Scorer] | None = None,
    repeats: int = 1,
) -> Experiment:
    """Run `workflow` on every case under every variant, `repeats` times, and score the runs.

    Args:
        workflow: The workflow to run.
        inputs: The cases: strings (other inputs are converted with `str`), `Case`s, or a
            pydantic-evals `Dataset` (or its cases).
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
        scorers: Scorers (`thena_nb.scorers`, or any `fn(run, case)` giving a bool, a number
            or a `Score`), as a list (columns named by each scorer's `name` or `__name__`)
            or a dict of column name to scorer. They score every run once all have ended;
            a scorer that raises gives that run a `scorer_error`, never stops the rest.
        repeats: Runs per (case, variant), each an independent sample stored as its own
            run (the repeat index is part of its id, so a re-run reuses repeat by repeat).

    Returns:
        The `Experiment`.

    Raises:
        TypeError, ValueError: Bad `inputs`, `variants`, `concurrency`, `repeats` or
            `scorers` (before any run starts).
        KeyboardInterrupt: The experiment was interrupted; `exc.experiment` holds the runs
            that finished (they are in the store too, so running again reuses them).
    """
    plan = Plan.of(
        workflow, inputs, variants, concurrency=concurrency, backend=backend, repeats=repeats
    )
    named = named_scorers(scorers)
    exp = Experiment(workflow.name, plan.inputs, plan.variants, cases=plan.cases, repeats=repeats)
    running = _execute(
        exp, plan, store=store, progress=progress, ray_address=ray_address, scorers=named
    )
    try:
        return run_sync(running)
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
    scorers: Sequence[Scorer] | Mapping[str, Scorer] | None = None,
    repeats: int = 1,
) -> Experiment:
    """The async form of `run_experiment`.

    Raises:
        asyncio.CancelledError: The task was cancelled; the runs in flight are cancelled and
            `exc.experiment` holds the runs that finished.
    """
    plan = Plan.of(
        workflow, inputs, variants, concurrency=concurrency, backend=backend, repeats=repeats
    )
    named = named_scorers(scorers)
    exp = Experiment(workflow.name, plan.inputs, plan.variants, cases=plan.cases, repeats=repeats)
    return await _execute(
        exp, plan, store=store, progress=progress, ray_address=ray_address, scorers=named
    )


async def _execute(
    exp: Experiment,
    plan: Plan,
    *,
    store: Any,
    progress: bool,
    ray_address: str | None,
    scorers: Mapping[str, Scorer],
) -> Experiment:
    """Fill `exp` with the plan's runs (first those the store finished, then the rest), then
    score them."""
    started = time.perf_counter()
    runs_store = resolve_store(store)
    bar = _progress_bar(len(plan.jobs), progress, plan.workflow.name)
    gate = Gates(plan.workflow.retry.initial_delay)  # local runs share them; Ray tasks go without

    def done(job: Job, run: Run) -> None:
        run.workflow = plan.variant_workflows[job.variant]
        exp._keep(job.slot, run)
        exp.slowdowns = gate.slowdowns
        bar.update(1)

    try:
        todo = await reuse_finished(plan.jobs, runs_store, done)
        exp.reused = len(plan.jobs) - len(todo)
        exp._reused = {j.slot for j in plan.jobs} - {j.slot for j in todo}
        if plan.backend == "ray":
            await run_ray(plan, todo, done, store=runs_store, address=ray_address)
        else:
            await run_local(plan, todo, done, gate, store=runs_store)
        if scorers:
            await exp._score(scorers, concurrency=plan.concurrency)
    except (asyncio.CancelledError, KeyboardInterrupt) as exc:
        exp.cancelled = True
        setattr(exc, "experiment", exp)  # noqa: B010 - read back as `exc.experiment`
        raise
    finally:
        exp.slowdowns = gate.slowdowns
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
