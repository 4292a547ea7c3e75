"""Where an experiment's runs happen: in this process on asyncio, or on Ray workers.

On Ray, each worker is an async actor that runs many runs at once on its own event loop,
behind its own rate-limit gates; the driver keeps `concurrency` runs in flight over all the
workers and writes each run to the store as it comes back. A worker that dies loses only
the runs it had in flight: each becomes a failed run that says so, the worker is replaced,
and the other runs go on.
"""

from __future__ import annotations

import asyncio
import functools
import gc
from collections.abc import Awaitable, Iterable
from datetime import UTC, datetime
from typing import Any

from thena_nb.core._collector import RUN_THRESHOLDS, fewer_collections
from thena_nb.core.records.decisions import Approver
from thena_nb.core.runs.run import Run
from thena_nb.core.store._owner import RunInUse
from thena_nb.core.store.base import records_of
from thena_nb.core.workflow import Workflow
from thena_nb.experiments._gate import Gates, gated
from thena_nb.experiments._plan import Done, Job, Plan, run_claimed
from thena_nb.experiments._ray_pickle import dumps_workflows, loads_workflows

__all__ = ["ensure_ray", "run_live", "run_local", "run_ray"]


# -- local backend -----------------------------------------------------------------------


async def run_local(plan: Plan, todo: list[Job], done: Done, gate: Gates, *, store: Any) -> None:
    """Run `todo` in this process, at most `plan.concurrency` at a time, each model call
    behind its model's gate."""
    workflows = {name: gated(wf, gate) for name, wf in plan.variant_workflows.items()}
    queue = iter(todo)
    timeout, approve = plan.run_timeout, plan.approve

    async def worker() -> None:
        for job in queue:  # (`run_live` without its frame: one per run in flight)
            wf = workflows[job.variant]
            start = functools.partial(_run_here, wf, job, store, timeout, approve)
            done(job, await run_claimed(job, store, start))

    with fewer_collections():
        await _all(worker() for _ in range(min(plan.concurrency, len(todo))))


async def run_live(
    workflow: Workflow,
    job: Job,
    store: Any,
    timeout: float | None = None,
    approve: Approver | None = None,
) -> Run:
    """One run in this process, or the run another process made of it meanwhile (the same
    experiment run twice at once: a run has one writer)."""
    return await run_claimed(job, store, lambda: _run_here(workflow, job, store, timeout, approve))


async def _run_here(
    workflow: Workflow,
    job: Job,
    store: Any,
    timeout: float | None,
    approve: Approver | None = None,
) -> Run:
    """One run in this process; cancelling it cancels the session's own task too.

    With `timeout`, a run still going after that many seconds is cancelled and ends
    `"failed"` with a `TimeoutError` as its error (stored so, when there is a store).
    `approve` decides the calls a tool gate holds.

    Raises:
        RunInUse: Another writer holds the run.
    """
    # Without `approve`, a tool gate ends the run as `"waiting"` (a row status), to resume
    # by its id later.
    s = workflow.session(
        job.input,
        run_id=job.run_id,
        store=False if store is None else store,
        approve=approve,
        at_gate="wait",
    )
    try:
        # Without a time limit the run goes on in this task (a task fewer per run); with
        # one, in the session's own task, which the limit cancels with its reason.
        run = await (s._run_to_end() if timeout is None else _timed(s, timeout, store))
    except asyncio.CancelledError:
        # A session in a task of its own: stop it, or it would go on calling the model
        # after the experiment was cancelled; it records the run as stopped. (Run in this
        # task, it has recorded the cancel already.)
        if timeout is not None:
            await _cancel_session(s)
        raise
    except Exception as exc:  # the run, also when it failed (the partial run rides on it)
        failed = getattr(exc, "run", None)
        if not isinstance(failed, Run):
            raise
        run = failed
    if isinstance(s.exception, RunInUse):
        raise s.exception
    return run


async def _timed(s: Any, timeout: float, store: Any) -> Run:
    """`s.run()`, or the run failed with a `TimeoutError` once `timeout` seconds passed."""
    deadline = asyncio.timeout(timeout)
    try:
        async with deadline:
            run: Run = await s.run()
            return run
    except TimeoutError:
        if not deadline.expired():
            raise  # the run's own TimeoutError: it failed by itself
    # The session ends the run `failed` with this error, and stores it so (core/engine/session.py).
    error = f"TimeoutError: the run took longer than run_timeout={timeout:g} s and was cancelled"
    await _cancel_session(s, error)
    ended: Run = s.result
    return ended


async def _cancel_session(s: Any, message: str | None = None) -> None:
    if s.task is not None and not s.task.done():
        s.task.cancel(message)
        await asyncio.wait([s.task])


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
    """Run `todo` on Ray workers, at most `plan.concurrency` at a time over all of them;
    the driver writes each run to `store` as it comes back."""
    if not todo:
        return
    ray = ensure_ray(address)
    blob = dumps_workflows(plan.variant_workflows)  # names what cannot be sent, if anything
    pool = _Pool(ray, blob, plan, workers=_worker_count(ray, plan, len(todo)))
    queue = iter(todo)

    async def worker() -> None:
        for job in queue:
            run = await pool.run(job)
            await _save(store, run)
            done(job, run)

    try:
        await _all(worker() for _ in range(min(plan.concurrency, len(todo))))
    finally:
        pool.close()


def ensure_ray(address: str | None) -> Any:
    """The `ray` module, initialised: connected to the cluster at `address`, or Ray started
    on this machine without its dashboard (fewer processes to start and to end).

    Call it on the thread that will call `ray.shutdown()` (a notebook's main thread, not
    the thread a running loop sends `wf.map` to): Ray ties the processes it starts to the
    thread that started them, and when that thread ends first, some of them are left over.
    """
    ray = _import_ray()
    if ray.is_initialized():
        return ray
    if address is None:
        ray.init(include_dashboard=False, ignore_reinit_error=True)
    else:
        ray.init(address=address, ignore_reinit_error=True)
    return ray


def _worker_count(ray: Any, plan: Plan, jobs: int) -> int:
    """One worker per CPU the cluster has free, never more than runs in flight."""
    cpus = int(ray.available_resources().get("CPU", 1))
    return max(1, min(cpus, plan.concurrency, jobs))


class _Pool:
    """The experiment's Ray workers, each given a share of the runs in flight."""

    def __init__(self, ray: Any, blob: bytes, plan: Plan, *, workers: int) -> None:
        self._ray = ray
        self._plan = plan
        self._make = functools.partial(
            _remote_worker().options(max_concurrency=max(plan.concurrency, 1)).remote,
            blob,
            plan.run_timeout,
            plan.approve,
        )
        self.actors: list[Any] = [self._make() for _ in range(workers)]
        self._load = [0] * workers
        self.replaced = 0
        self._limit = 2 * workers + 3  # workers that may die before the experiment gives up

    async def run(self, job: Job) -> Run:
        """The run of `job` on the least busy worker; a failed run if that worker died."""
        i = min(range(len(self.actors)), key=self._load.__getitem__)
        actor = self.actors[i]
        self._load[i] += 1
        ref = actor.run.remote(job.variant, job.input, job.run_id)
        try:
            text = await ref
        except asyncio.CancelledError:
            self._ray.cancel(ref, force=False)
            raise
        except self._ray.exceptions.RayActorError as exc:
            self._replace(i, actor, exc)
            return self._lost(job, exc)
        finally:
            self._load[i] -= 1
        wf = self._plan.variant_workflows[job.variant]
        return Run.from_json(text, state_type=wf.state)

    def _replace(self, i: int, dead: Any, exc: BaseException) -> None:
        """A new worker in place of one that died (once, whichever run noticed first)."""
        if self.actors[i] is not dead:
            return
        self.replaced += 1
        if self.replaced > self._limit:
            raise RuntimeError(
                f"{self.replaced} Ray workers died during the experiment; it stops here "
                f"(the runs that finished are on `exc.experiment`). Last: {_first_line(exc)}"
            ) from exc
        self._ray.kill(dead)  # unreachable but maybe alive: make sure it is gone
        self.actors[i] = self._make()

    def _lost(self, job: Job, exc: BaseException) -> Run:
        """The failed run of a job whose worker died while it ran."""
        wf = self._plan.variant_workflows[job.variant]
        run = Run(workflow_name=wf.name, input=job.input, run_id=job.run_id)
        run.status = "failed"
        run.error = f"WorkerDied: the Ray worker running this run died: {_first_line(exc)}"
        run.finished_at = datetime.now(UTC)
        return run

    def close(self) -> None:
        """End every worker (their processes go back to Ray)."""
        for actor in self.actors:
            self._ray.kill(actor)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ImportError(
            "backend='ray' needs Ray; install it with `pip install 'thena_nb[ray]'`"
        ) from None
    return ray


@functools.cache
def _remote_worker() -> Any:
    """The Ray actor class of `RayWorker`, made once per process."""
    return _import_ray().remote(num_cpus=1, max_restarts=0)(RayWorker)


class RayWorker:
    """A Ray actor: the experiment's workflows, gated, and runs of them on its event loop."""

    def __init__(
        self, blob: bytes, run_timeout: float | None, approve: Approver | None = None
    ) -> None:
        workflows = loads_workflows(blob)
        # One gate per model in this worker: a rate limit pauses this worker's runs.
        gates = Gates(next(iter(workflows.values())).retry.initial_delay)
        self.workflows = {name: gated(wf, gates) for name, wf in workflows.items()}
        self.run_timeout = run_timeout
        self.approve = approve
        # The actor's process runs nothing but runs, many at once (see `core/_collector`).
        gc.set_threshold(*RUN_THRESHOLDS)

    async def run(self, variant: str, input: str, run_id: str) -> str:
        """One run, as JSON (the store write happens on the driver)."""
        job = Job(0, input, variant, run_id)
        run = await run_live(self.workflows[variant], job, None, self.run_timeout, self.approve)
        return run.to_json()


async def _save(store: Any, run: Run) -> None:
    """Write a run made elsewhere (a Ray worker) to the store, turn by turn."""
    if store is None:
        return
    await store.run_started(run)
    for record in records_of(run):
        await store.turn_recorded(run, record)
    await store.run_finished(run)
