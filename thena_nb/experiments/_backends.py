"""Where an experiment's runs happen: in this process on asyncio, or as Ray tasks."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Iterable
from typing import Any

from thena_nb.core.run import Run
from thena_nb.core.store._owner import RunInUse
from thena_nb.core.store.base import records_of
from thena_nb.core.workflow import Workflow
from thena_nb.experiments._gate import Gates, gated
from thena_nb.experiments._plan import Done, Job, Plan, run_claimed

__all__ = ["run_local", "run_ray"]


# -- local backend -----------------------------------------------------------------------


async def run_local(plan: Plan, todo: list[Job], done: Done, gate: Gates, *, store: Any) -> None:
    """Run `todo` in this process, at most `plan.concurrency` at a time, each model call
    behind its model's gate."""
    workflows = {name: gated(wf, gate) for name, wf in plan.variant_workflows.items()}
    queue = iter(todo)

    async def worker() -> None:
        for job in queue:
            done(job, await _run_live(workflows[job.variant], job, store))

    await _all(worker() for _ in range(min(plan.concurrency, len(todo))))


async def _run_live(workflow: Workflow, job: Job, store: Any) -> Run:
    """One run in this process, or the run another process made of it meanwhile (the same
    experiment run twice at once: a run has one writer)."""
    return await run_claimed(job, store, lambda: _run_here(workflow, job, store))


async def _run_here(workflow: Workflow, job: Job, store: Any) -> Run:
    """One run in this process; cancelling it cancels the session's own task too.

    Raises:
        RunInUse: Another writer holds the run.
    """
    # A tool gate ends the run as `"waiting"` (a row status), to resume by its id later.
    s = workflow.session(
        job.input, run_id=job.run_id, store=False if store is None else store, at_gate="wait"
    )
    try:
        run = await _finish_run(s.run())
    except asyncio.CancelledError:
        # The session advances in a task of its own; stop it, or it would go on calling
        # the model after the experiment was cancelled. It records the run as failed.
        if s.task is not None and not s.task.done():
            s.task.cancel()
            await asyncio.wait([s.task])
        raise
    if isinstance(s.exception, RunInUse):
        raise s.exception
    return run


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


async def run_ray(
    plan: Plan, todo: list[Job], done: Done, *, store: Any, address: str | None
) -> None:
    """Run `todo` as Ray tasks, at most `plan.concurrency` at a time; the driver writes each
    run to `store` as it comes back."""
    if not todo:
        return
    ray = _import_ray()
    if not ray.is_initialized():
        ray.init(address=address, ignore_reinit_error=True)
    remote_run = _remote_run()
    refs = {name: ray.put(wf) for name, wf in plan.variant_workflows.items()}
    queue = iter(todo)

    async def worker() -> None:
        for job in queue:
            ref = remote_run.remote(refs[job.variant], job.input, job.run_id)
            try:
                text = await ref
            except asyncio.CancelledError:
                ray.cancel(ref, force=True)
                raise
            wf = plan.variant_workflows[job.variant]
            run = Run.from_json(text, state_type=wf.state)
            await _save(store, run)
            done(job, run)

    await _all(worker() for _ in range(min(plan.concurrency, len(todo))))


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ImportError(
            "backend='ray' needs Ray; install it with `pip install 'thena_nb[ray]'`"
        ) from None
    return ray


@functools.cache
def _remote_run() -> Any:
    """The Ray remote function of `_run_in_worker`, made once per process."""
    return _import_ray().remote(_run_in_worker)


def _run_in_worker(workflow: Workflow, input: str, run_id: str) -> str:
    """The Ray task: one run, returned as JSON (the store write happens on the driver)."""
    run = asyncio.run(_finish_run(workflow.arun(input, run_id=run_id, store=False)))
    return run.to_json()


async def _save(store: Any, run: Run) -> None:
    """Write a run made elsewhere (a Ray worker) to the store, turn by turn."""
    if store is None:
        return
    await store.run_started(run)
    for record in records_of(run):
        await store.turn_recorded(run, record)
    await store.run_finished(run)
