"""The plan of an experiment: its jobs and their run ids, and which jobs the store already did."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import uuid
import warnings
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Literal

from thena_nb.core.parts.changes import Changes, apply_changes
from thena_nb.core.records.decisions import Approver
from thena_nb.core.records.errors import StoreError
from thena_nb.core.runs.run import INTERRUPTED, Run
from thena_nb.core.store._owner import RunInUse, keep_ended
from thena_nb.core.workflow import Workflow
from thena_nb.experiments._fingerprint import Fingerprint, Unfingerprintable, digest
from thena_nb.experiments._reuse import fingerprint_or_reason
from thena_nb.experiments._rows import RunFacts, facts_from_summary
from thena_nb.experiments.cases import Case, as_cases

__all__ = [
    "BASE_VARIANT",
    "Backend",
    "Done",
    "Job",
    "Plan",
    "Summarised",
    "fingerprint",
    "retarget",
    "reuse_finished",
    "run_claimed",
    "stored_statuses",
]

Backend = Literal["local", "ray"]

BASE_VARIANT = "base"
"""The variant name of an experiment run without `variants`."""

_REUSABLE = ("finished", "budget", "stopped", "waiting")
"""Statuses of stored runs that a re-run takes as they are; failed runs run again. A waiting
run is kept as it is too: `wf.resume(run_id, decisions=...)` finishes it under its id."""
_REUSABLE_SET = frozenset(_REUSABLE)


@dataclasses.dataclass(frozen=True, slots=True)  # one per run: kept small
class Job:
    """One run to make: an input under a variant (one of its repeats), and its place among
    the experiment's runs."""

    slot: int
    input: str
    variant: str
    run_id: str
    repeat: int = 0
    reusable: bool = True
    """`False` when the variant could not be fingerprinted: a stored run is never taken for
    it (its run id is new every time)."""
    occurrence: int = 0
    """How many times the same input came before this one (each is a run of its own)."""


Done = Callable[[Job, Run], None]
"""Called with each job and its run as the run ends (or is found finished in the store)."""
Summarised = Callable[[Job, RunFacts], None]
"""Called with each job whose run the store finished, with what its row needs of it."""


@dataclasses.dataclass(frozen=True)
class Plan:
    """Everything an experiment runs, checked before the first run starts."""

    workflow: Workflow
    inputs: list[str]
    variants: dict[str, Changes]
    variant_workflows: dict[str, Workflow]
    jobs: list[Job]
    concurrency: int
    backend: Backend
    cases: list[Case] = dataclasses.field(default_factory=list)
    repeats: int = 1
    run_timeout: float | None = None
    """Seconds a run may take before it is cancelled and ends failed (`None`: no limit)."""
    fingerprints: dict[str, Fingerprint | None] = dataclasses.field(default_factory=dict)
    """Each variant's fingerprint when the experiment began (`None`: it has none)."""
    approve: Approver | None = None
    """Decides every call a tool gate holds, in every run (`wf.map(approve=)`)."""
    approve_digest: str | None = None
    """The digest of `approve`'s fingerprint (`None`: no `approve`, or one that has none)."""

    @classmethod
    def of(
        cls,
        workflow: Workflow,
        inputs: Iterable[Any],
        variants: Mapping[str, Changes] | None,
        *,
        concurrency: int,
        backend: Backend,
        repeats: int = 1,
        run_timeout: float | None = None,
        approve: Approver | None = None,
    ) -> Plan:
        """The jobs of an experiment, in (input, variant, repeat) order, with every variant
        built.

        Raises:
            TypeError: `inputs` is a single string, or `approve` is not callable.
            ValueError: Bad `variants`, `concurrency`, `backend`, `repeats` or
                `run_timeout`.
        """
        cases = as_cases(inputs)
        if not isinstance(concurrency, int) or concurrency < 1:
            raise ValueError(f"`concurrency` must be a whole number >= 1, got {concurrency!r}")
        if not isinstance(repeats, int) or isinstance(repeats, bool) or repeats < 1:
            raise ValueError(f"`repeats` must be a whole number >= 1, got {repeats!r}")
        if backend not in ("local", "ray"):
            raise ValueError(f"`backend` must be 'local' or 'ray', got {backend!r}")
        _check_timeout(run_timeout)
        texts = [case.text for case in cases]
        chosen: dict[str, Changes] = dict(variants) if variants else {BASE_VARIANT: {}}
        # Every variant is built (and checked) before anything runs.
        built = {name: apply_changes(workflow, changes) for name, changes in chosen.items()}
        fingerprints = _fingerprints(workflow.name, built)
        decider = _approve_digest(workflow.name, approve)
        # Runs decided by an `approve` that has no fingerprint are never reused.
        ids_from = fingerprints if approve is None or decider else dict.fromkeys(fingerprints)
        jobs = _jobs(workflow.name, texts, ids_from, repeats)
        return cls(
            workflow, texts, chosen, built, jobs, concurrency, backend, cases, repeats,
            run_timeout, fingerprints, approve, decider,
        )  # fmt: skip

    def decided(self, bases: Mapping[str, str | None]) -> dict[str, str | None]:
        """The digests the jobs' run ids are made from: the variants' own (`bases`), each
        mixed with `approve`'s when there is one, so that a run decided by another
        `approve` (or left waiting by none) is never taken for a run decided by this one."""
        if self.approve is None:
            return dict(bases)
        own = self.approve_digest
        return {
            name: None if base is None or own is None else _mix(base, own)
            for name, base in bases.items()
        }


def _approve_digest(workflow_name: str, approve: Any) -> str | None:
    """The digest of `approve`'s fingerprint; `None` without `approve`, or (said once) when
    it has none.

    Raises:
        TypeError: `approve` is not callable.
    """
    if approve is None:
        return None
    if not callable(approve):
        raise TypeError(
            f"`approve` takes `fn(pending_call) -> Decision` (e.g. `lambda call: "
            f"Decision.approve()`), got {approve!r}"
        )
    try:
        return digest(approve)
    except Unfingerprintable as exc:
        warnings.warn(
            f"the `approve` of this experiment of workflow {workflow_name!r} cannot be "
            f"fingerprinted ({exc}), so its runs are never reused from the store: they run "
            f"again every time",
            stacklevel=5,  # the caller of run_experiment (via _prepare, Plan.of)
        )
        return None


def _mix(base: str, approve_digest: str) -> str:
    return hashlib.blake2b(
        f"{base}\x1fapprove {approve_digest}".encode(), digest_size=16
    ).hexdigest()


def _check_timeout(run_timeout: Any) -> None:
    ok = isinstance(run_timeout, int | float) and not isinstance(run_timeout, bool)
    if run_timeout is not None and not (ok and 0 < run_timeout < float("inf")):
        raise ValueError(
            f"`run_timeout` must be a number of seconds > 0 (or None for no limit), "
            f"got {run_timeout!r}"
        )


def _fingerprints(
    workflow_name: str, variants: Mapping[str, Workflow]
) -> dict[str, Fingerprint | None]:
    """Each variant's fingerprint; one that has none is said once (its runs never reuse)."""
    fingerprints: dict[str, Fingerprint | None] = {}
    for name, wf in variants.items():
        fingerprints[name], why = fingerprint_or_reason(wf)
        if why:
            warnings.warn(
                f"variant {name!r} of workflow {workflow_name!r} cannot be fingerprinted "
                f"({why}), so its runs are never reused from the store: they run again "
                f"every time",
                stacklevel=5,  # the caller of run_experiment (via _prepare, Plan.of)
            )
    return fingerprints


def _jobs(
    workflow_name: str,
    inputs: list[str],
    fingerprints: Mapping[str, Fingerprint | None],
    repeats: int = 1,
) -> list[Job]:
    """One job per input, variant and repeat, in that order; an input given twice is two
    runs (each with an id of its own), and so is each repeat."""
    bases = {name: fp.digest() if fp else None for name, fp in fingerprints.items()}
    seen: Counter[str] = Counter()
    jobs: list[Job] = []
    for text in inputs:
        occurrence = seen[text]
        seen[text] += 1
        for name, base in bases.items():
            for repeat in range(repeats):
                if base is None:
                    jobs.append(
                        Job(len(jobs), text, name, uuid.uuid4().hex[:12], repeat, False, occurrence)
                    )
                    continue
                run_id = _run_id(workflow_name, name, base, text, occurrence, repeat)
                jobs.append(Job(len(jobs), text, name, run_id, repeat, True, occurrence))
    return jobs


def retarget(
    workflow_name: str,
    jobs: list[Job],
    bases: Mapping[str, str | None],
    made_from: Mapping[str, str | None] | None = None,
) -> list[Job]:
    """The jobs with their run ids made from `bases` (a variant's digest, see `_reuse`);
    those of a variant whose ids were made from the same digest (`made_from`) as they are."""
    made_from = made_from or {}
    moved = {name for name, base in bases.items() if base is None or base != made_from.get(name)}
    out = []
    for job in jobs:
        if job.reusable and job.variant in moved:
            run_id = job_run_id(workflow_name, job, bases[job.variant])
            job = dataclasses.replace(job, run_id=run_id)
        out.append(job)
    return out


def job_run_id(workflow_name: str, job: Job, base: str | None) -> str:
    """The run id `job` has when its variant's runs are made from digest `base`."""
    if base is None:
        return job.run_id
    return _run_id(workflow_name, job.variant, base, job.input, job.occurrence, job.repeat)


def _run_id(
    workflow_name: str, variant: str, digest: str, input: str, occurrence: int, repeat: int = 0
) -> str:
    """The same run of the same experiment gets the same id, in any process.

    The repeat index is part of the key, so each repeat is a run of its own and a re-run
    reuses repeat by repeat; repeat 0 keeps the id a run without repeats has, so raising
    `repeats` later reuses the runs already made.
    """
    key = f"{workflow_name}\x1f{variant}\x1f{digest}\x1f{occurrence}\x1f{input}"
    if repeat:
        key += f"\x1frepeat {repeat}"
    return hashlib.blake2b(key.encode(), digest_size=6).hexdigest()


def fingerprint(workflow: Workflow) -> str | None:
    """What a run of `workflow` depends on besides its input, code included; `None` when
    some part of it cannot be fingerprinted (its runs are then never reused).

    The steps, every agent (prompt, tools, model and the model's settings), loop limits,
    the code of functions, tools, stop conditions and history processors, the state class,
    budget and retry policy all count (see `_fingerprint`).
    """
    fp = fingerprint_or_reason(workflow)[0]
    return fp.digest() if fp is not None else None


async def reuse_finished(
    jobs: list[Job], store: Any, done: Done, summarised: Summarised | None = None
) -> list[Job]:
    """Hand the runs the store already finished to `done`, a batch at a time as they are
    loaded (so a progress bar counts them as they are found); return the jobs still to run.

    The jobs' runs are looked up by run id (which the variant's fingerprint is part of):
    with a store that has `statuses`, an index lookup that reads nothing else. Given
    `summarised`, and a store that has `summaries`, each run goes to `summarised` as what
    its row needs, read in bulk, and is not loaded (`done` gets those it cannot summarise).
    """
    if store is None or not jobs:
        return list(jobs)
    by_id = {job.run_id: job for job in jobs if job.reusable}
    ready = await asyncio.to_thread(_finished_ids, store, list(by_id)) if by_id else []
    reused: set[str] = set()
    if summarised is not None and callable(getattr(store, "summaries", None)):
        ready = await _summarise(store, ready, by_id, summarised, reused)
    for start in range(0, len(ready), _LOAD_BATCH):
        batch = ready[start : start + _LOAD_BATCH]
        for run_id, run in (await asyncio.to_thread(_load_some, store, batch)).items():
            done(by_id[run_id], run)
            reused.add(run_id)
    return [job for job in jobs if job.run_id not in reused]


_LOAD_BATCH = 64
"""Stored runs loaded per worker-thread hop while an experiment looks for finished runs."""
_SUMMARY_BATCH = 500
"""Stored runs summarised per worker-thread hop (`store.summaries`, one statement each)."""


async def _summarise(
    store: Any, ready: list[str], by_id: dict[str, Job], summarised: Summarised, reused: set[str]
) -> list[str]:
    """Hand each of `ready` the store can summarise to `summarised`, a batch at a time
    (adding its id to `reused`); return the ids still to load. A run cut short by a Ctrl-C
    is forgotten (it runs again), as `_load_some` does."""
    rest: list[str] = []
    for start in range(0, len(ready), _SUMMARY_BATCH):
        batch = ready[start : start + _SUMMARY_BATCH]
        found = await asyncio.to_thread(_summaries_of, store, batch)
        for run_id in batch:
            facts = found.get(run_id)
            if facts is None:
                if run_id not in found:
                    rest.append(run_id)
                continue
            summarised(by_id[run_id], facts)
            reused.add(run_id)
    return rest


def _summaries_of(store: Any, run_ids: list[str]) -> dict[str, RunFacts | None]:
    """The facts of each run the store summarises (`None`: interrupted, now forgotten)."""
    out: dict[str, RunFacts | None] = {}
    for run_id, summary in store.summaries(run_ids).items():
        try:
            facts = facts_from_summary(summary)
        except (ValueError, TypeError, KeyError, AttributeError):
            continue  # loaded instead, which says what is wrong with it
        if facts.status not in _REUSABLE_SET:
            continue  # (it changed since it was looked up: loaded, as before)
        if facts.error == INTERRUPTED:  # cut short by a Ctrl-C or a cancel: run it again
            with contextlib.suppress(StoreError):
                store.delete(run_id)
            out[run_id] = None
            continue
        out[run_id] = facts
    return out


def _finished_ids(store: Any, wanted: list[str]) -> list[str]:
    found = stored_statuses(store, wanted)
    return [run_id for run_id in wanted if found.get(run_id) in _REUSABLE]


def stored_statuses(store: Any, run_ids: list[str]) -> dict[str, str]:
    """The stored status of each of `run_ids` the store holds: by index (`statuses`) when
    the store can, else from `list_runs` (a store of your own without `statuses`)."""
    lookup = getattr(store, "statuses", None)
    if lookup is not None:
        found: dict[str, str] = lookup(run_ids)
        return found
    wanted = set(run_ids)
    return {row["run_id"]: row["status"] for row in store.list_runs() if row["run_id"] in wanted}


def _load_some(store: Any, run_ids: list[str]) -> dict[str, Run]:
    out: dict[str, Run] = {}
    for run_id in run_ids:
        try:
            run = store.load(run_id)
        except StoreError as exc:
            _forget_unreadable(store, run_id, exc)
            continue
        if run.error == INTERRUPTED:  # cut short by a Ctrl-C or a cancel: run it again
            with contextlib.suppress(StoreError):
                store.delete(run_id)
            continue
        out[run_id] = run
    return out


def _forget_unreadable(store: Any, run_id: str, exc: StoreError) -> None:
    """A stored run that cannot be read is run again: say so, and drop what is left of it
    (its id is about to be written afresh)."""
    warnings.warn(
        f"stored run {run_id!r} cannot be reused ({exc}); it runs again",
        RuntimeWarning,
        stacklevel=2,
    )
    with contextlib.suppress(StoreError):
        store.delete(run_id)


_WAIT_S = (0.02, 0.5)
"""How often a run another process is running is looked at: first, and at most."""


async def run_claimed(job: Job, store: Any, start: Callable[[], Awaitable[Run]]) -> Run:
    """`start()` the job's run; when another writer holds the run (`RunInUse`: the same
    experiment in another process), wait for it to end and reuse its run, or run it here
    if it did not end in a reusable way."""
    while True:
        token = keep_ended.set(_REUSABLE_SET)  # a run finished meanwhile is reused
        try:
            return await start()
        except RunInUse:
            if store is None:
                raise
        finally:
            keep_ended.reset(token)
        found = await _ended_elsewhere(store, job.run_id)
        if found is not None:
            return found


async def _ended_elsewhere(store: Any, run_id: str) -> Run | None:
    """Wait until the run is no longer running elsewhere; the run if it is reusable."""
    pause = _WAIT_S[0]
    while True:
        status = (await asyncio.to_thread(stored_statuses, store, [run_id])).get(run_id)
        if status != "running":
            break
        await asyncio.sleep(pause)
        pause = min(pause * 2, _WAIT_S[1])
    if status not in _REUSABLE:
        return None
    try:
        run: Run = await asyncio.to_thread(store.load, run_id)
    except StoreError as exc:
        _forget_unreadable(store, run_id, exc)
        return None
    return run
