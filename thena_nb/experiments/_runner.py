"""`run_experiment` and `arun_experiment`: plan the jobs, reuse what the store has, run the rest."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from typing import Any

from thena_nb.core.engine._aio import run_sync
from thena_nb.core.parts.changes import Changes
from thena_nb.core.records.decisions import Approver
from thena_nb.core.runs.run import Run
from thena_nb.core.store.base import resolve_store
from thena_nb.core.workflow import Workflow
from thena_nb.experiments._backends import ensure_ray, run_local, run_ray
from thena_nb.experiments._gate import Gates
from thena_nb.experiments._plan import (
    Backend,
    Job,
    Plan,
    Summarised,
    job_run_id,
    retarget,
    reuse_finished,
    stored_statuses,
)
from thena_nb.experiments._result import Experiment
from thena_nb.experiments._reuse import Reuse
from thena_nb.experiments._rows import RunFacts
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
    run_timeout: float | None = None,
    keep_runs: bool | None = None,
    reuse: bool = True,
    approve: Approver | None = None,
) -> Experiment:
    """Run `workflow` on every case under every variant, `repeats` times, and score the runs.

    Args:
        workflow: The workflow to run.
        inputs: The cases: strings (other inputs are converted with `str`), `Case`s, or a
            pydantic-evals `Dataset` (or its cases).
        variants: Variant name to changes dict (see `grid`); `None`: the workflow as it is.
        concurrency: At most this many runs at a time.
        backend: `"local"` (asyncio here) or `"ray"` (`thena_nb[ray]`): a Ray worker per
            free CPU; one that dies fails its runs in flight (they say so) and is replaced.
        store: Where every run is written: a store, `None` (the default store) or `False`.
        progress: Show a progress bar (terminal or notebook widget).
        ray_address: The Ray cluster to join if Ray is not initialised (`None`: start one).
        scorers: Scorers (`thena_nb.scorers`, or any `fn(run, case)` giving a bool, a number
            or a `Score`), as a list (columns named by each scorer's `name` or `__name__`)
            or a dict of column name to scorer. They score each run as it ends (async ones
            `concurrency` at a time); one that raises gives that run a `scorer_error`.
        repeats: Runs per (case, variant), each an independent sample stored as its own
            run (the repeat index is part of its id, so a re-run reuses repeat by repeat).
        run_timeout: Seconds a run may take; one still going then is a `failed` row.
        keep_runs: Keep every run in memory. `None` keeps them only without a store; with
            one, the experiment keeps a summary per run and `exp.runs` loads the runs.
        reuse: Take runs the store finished instead of running them again (see
            `thena_nb.experiments`); `False` runs every run again, in place of the old.
        approve: `fn(pending_call) -> Decision` for every gated call of every run (`wf.map`).

    Raises:
        TypeError, ValueError: Any bad argument, before any run starts; with `backend="ray"`,
            a model or tool that cannot be sent to the workers (the message names it).
        KeyboardInterrupt: The experiment was interrupted; `exc.experiment` holds the runs
            that finished (stored: running again reuses them), as any exception does.
    """
    options = dict(variants=variants, concurrency=concurrency, backend=backend, store=store,
                   progress=progress, ray_address=ray_address, scorers=scorers,
                   repeats=repeats, run_timeout=run_timeout, keep_runs=keep_runs,
                   reuse=reuse, approve=approve)  # fmt: skip
    exp, running = _prepare(workflow, inputs, start_ray=True, **options)
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
    run_timeout: float | None = None,
    keep_runs: bool | None = None,
    reuse: bool = True,
    approve: Approver | None = None,
) -> Experiment:
    """The async form of `run_experiment`.

    Raises:
        asyncio.CancelledError: The task was cancelled; the runs in flight are cancelled and
            `exc.experiment` holds the runs that finished.
    """
    options = dict(variants=variants, concurrency=concurrency, backend=backend, store=store,
                   progress=progress, ray_address=ray_address, scorers=scorers,
                   repeats=repeats, run_timeout=run_timeout, keep_runs=keep_runs,
                   reuse=reuse, approve=approve)  # fmt: skip
    _, running = _prepare(workflow, inputs, **options)
    return await running


def _prepare(
    workflow: Workflow,
    inputs: Iterable[Any],
    *,
    variants: Mapping[str, Changes] | None,
    concurrency: int,
    backend: Backend,
    store: Any,
    progress: bool,
    ray_address: str | None,
    scorers: Sequence[Scorer] | Mapping[str, Scorer] | None,
    repeats: int,
    run_timeout: float | None,
    keep_runs: bool | None,
    reuse: bool = True,
    approve: Approver | None = None,
    start_ray: bool = False,
) -> tuple[Experiment, Coroutine[Any, Any, Experiment]]:
    """The experiment, empty, and the coroutine that fills it; every argument is checked
    before any run starts. With `start_ray`, Ray is started (if it is not yet) here, on the
    caller's thread, not on the thread `run_sync` may run the coroutine on."""
    plan = Plan.of(
        workflow, inputs, variants, concurrency=concurrency, backend=backend, repeats=repeats,
        run_timeout=run_timeout, approve=approve,
    )  # fmt: skip
    named = named_scorers(scorers)
    if start_ray and plan.backend == "ray":
        ensure_ray(ray_address)
    exp = Experiment(
        plan.workflow.name, plan.inputs, plan.variants, cases=plan.cases, repeats=plan.repeats,
        workflows=plan.variant_workflows,
    )  # fmt: skip
    running = _execute(
        exp, plan, store=store, progress=progress, ray_address=ray_address, scorers=named,
        keep_runs=keep_runs, reuse=reuse,
    )  # fmt: skip
    return exp, running


async def _execute(
    exp: Experiment,
    plan: Plan,
    *,
    store: Any,
    progress: bool,
    ray_address: str | None,
    scorers: Mapping[str, Scorer],
    keep_runs: bool | None = None,
    reuse: bool = True,
) -> Experiment:
    """Fill `exp` with the plan's runs (first those the store finished, then the rest),
    scoring each as it ends."""
    started = time.perf_counter()
    runs_store = resolve_store(store)
    exp._store = runs_store
    exp.keep_runs = runs_store is None if keep_runs is None else bool(keep_runs)
    bar = _progress_bar(len(plan.jobs), progress, plan.workflow.name)
    gate = Gates(plan.workflow.retry.initial_delay)  # local runs share them
    scoring = exp._start_scoring(scorers, concurrency=plan.concurrency) if scorers else None
    reusing = Reuse(plan.workflow.name, plan.fingerprints, runs_store, enabled=reuse)
    why: dict[int, str] = {}

    def keep(job: Job, run: Run, reused: bool) -> None:
        run.workflow = plan.variant_workflows[job.variant]
        exp._keep(job.slot, run, reused=reused, changed=why.get(job.slot, ""))
        if scoring is not None:
            exp._score_one(scoring, job.slot, run)
        exp.slowdowns = gate.slowdowns
        bar.update(1)

    summarised, ended = _summarised(exp, bar, scoring), False  # (stored runs' rows alone)
    try:
        todo = await _to_run(plan, reusing, runs_store, lambda j, r: keep(j, r, True), summarised)
        why.update(await asyncio.to_thread(_reasons, reusing, plan.workflow.name, todo))
        exp.reused = len(plan.jobs) - len(todo)
        if plan.backend == "ray":
            await run_ray(plan, todo, lambda j, r: keep(j, r, False), store=runs_store,
                          address=ray_address)  # fmt: skip
        else:
            await run_local(plan, todo, lambda j, r: keep(j, r, False), gate, store=runs_store)
        if scoring is not None:
            await scoring.wait()
        ended = True
        await reusing.finish(plan.variant_workflows)
    except BaseException as exc:
        if not ended:  # the runs that did run still show what is state
            with contextlib.suppress(Exception):
                reusing.finish_now(plan.variant_workflows)
        if scoring is not None:
            scoring.cancel()
        if isinstance(exc, asyncio.CancelledError | KeyboardInterrupt):
            exp.cancelled = True
        setattr(exc, "experiment", exp)  # noqa: B010 - read back as `exc.experiment`
        raise
    finally:
        exp.slowdowns = gate.slowdowns
        exp.wall_s = time.perf_counter() - started
        bar.close()
    return exp


def _summarised(exp: Experiment, bar: Any, scoring: Any) -> Summarised | None:
    """What takes a stored run's row without the run (`exp.runs` loads it when read), or
    `None` when each stored run is to be loaded: to be scored, or kept (`keep_runs`)."""
    if scoring is not None or exp.keep_runs:
        return None

    def keep_facts(job: Job, facts: RunFacts) -> None:
        exp._keep_facts(job.slot, facts, reused=True)
        bar.update(1)

    return keep_facts


async def _to_run(
    plan: Plan,
    reusing: Reuse,
    store: Any,
    reused: Callable[[Job, Run], None],
    summarised: Summarised | None = None,
) -> list[Job]:
    """The jobs to run: those whose stored run is not reused (`reused` is told each one
    that is, or `summarised` when it is given and the store can summarise the run), or,
    without reuse, every job, its stored run forgotten."""
    made_from = {name: fp.digest() if fp else None for name, fp in plan.fingerprints.items()}
    bases = plan.decided(await reusing.prepare())  # with `approve=`, its code counts too
    jobs = retarget(plan.workflow.name, plan.jobs, bases, made_from)
    if reusing.enabled:
        return await reuse_finished(jobs, store, reused, summarised)
    return await asyncio.to_thread(_forget_stored, store, jobs)


def _forget_stored(store: Any, jobs: list[Job]) -> list[Job]:
    """`reuse=False`: forget the stored runs the jobs would take (not one running
    elsewhere), so that the fresh runs take their place; every job is to run."""
    if store is not None:
        ids = [job.run_id for job in jobs if job.reusable]
        for run_id, status in stored_statuses(store, ids).items():
            if status != "running":
                store.delete(run_id)
    return list(jobs)


def _reasons(reusing: Reuse, workflow_name: str, todo: list[Job]) -> dict[int, str]:
    """Why each job to run was not taken from the store (the `changed` column)."""
    if not todo:
        return {}
    nearest = {
        job.slot: job_run_id(workflow_name, job, base)
        for job in todo
        if job.reusable and (base := reusing.nearest_base(job.variant)) is not None
    }
    store = reusing.store
    ids = [job.run_id for job in todo if job.reusable] + list(nearest.values())
    found = stored_statuses(store, ids) if store is not None and reusing.enabled else {}
    return {
        job.slot: reusing.why(
            job.variant, found.get(job.run_id), job.slot in nearest and nearest[job.slot] in found
        )
        for job in todo
    }


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
