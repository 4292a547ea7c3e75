"""The plan of an experiment: its jobs and their run ids, and which jobs the store already did."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal

from thena_nb.core.agent import Agent
from thena_nb.core.cases import Case, as_cases
from thena_nb.core.changes import Changes, apply_changes
from thena_nb.core.errors import StoreError
from thena_nb.core.run import Run
from thena_nb.core.steps import LoopStep, ParallelStep, walk
from thena_nb.core.workflow import Workflow

__all__ = ["BASE_VARIANT", "Backend", "Done", "Job", "Plan", "fingerprint", "reuse_finished"]

Backend = Literal["local", "ray"]

BASE_VARIANT = "base"
"""The variant name of an experiment run without `variants`."""

_REUSABLE = ("finished", "budget", "stopped", "waiting")
"""Statuses of stored runs that a re-run takes as they are; failed runs run again. A waiting
run is kept as it is too: `wf.resume(run_id, decisions=...)` finishes it under its id."""


@dataclasses.dataclass(frozen=True)
class Job:
    """One run to make: an input under a variant (one of its repeats), and its place among
    the experiment's runs."""

    slot: int
    input: str
    variant: str
    run_id: str
    repeat: int = 0


Done = Callable[[Job, Run], None]
"""Called with each job and its run as the run ends (or is found finished in the store)."""


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
    ) -> Plan:
        """The jobs of an experiment, in (input, variant, repeat) order, with every variant
        built.

        Raises:
            TypeError: `inputs` is a single string.
            ValueError: Bad `variants`, `concurrency`, `backend` or `repeats`.
        """
        cases = as_cases(inputs)
        if not isinstance(concurrency, int) or concurrency < 1:
            raise ValueError(f"`concurrency` must be a whole number >= 1, got {concurrency!r}")
        if not isinstance(repeats, int) or isinstance(repeats, bool) or repeats < 1:
            raise ValueError(f"`repeats` must be a whole number >= 1, got {repeats!r}")
        if backend not in ("local", "ray"):
            raise ValueError(f"`backend` must be 'local' or 'ray', got {backend!r}")
        texts = [case.text for case in cases]
        chosen: dict[str, Changes] = dict(variants) if variants else {BASE_VARIANT: {}}
        # Every variant is built (and checked) before anything runs.
        built = {name: apply_changes(workflow, changes) for name, changes in chosen.items()}
        jobs = _jobs(workflow.name, texts, built, repeats)
        return cls(workflow, texts, chosen, built, jobs, concurrency, backend, cases, repeats)


def _jobs(
    workflow_name: str, inputs: list[str], variants: Mapping[str, Workflow], repeats: int = 1
) -> list[Job]:
    """One job per input, variant and repeat, in that order; an input given twice is two
    runs (each with an id of its own), and so is each repeat."""
    fingerprints = {name: fingerprint(wf) for name, wf in variants.items()}
    seen: Counter[str] = Counter()
    jobs: list[Job] = []
    for text in inputs:
        occurrence = seen[text]
        seen[text] += 1
        for name, digest in fingerprints.items():
            for repeat in range(repeats):
                run_id = _run_id(workflow_name, name, digest, text, occurrence, repeat)
                jobs.append(Job(len(jobs), text, name, run_id, repeat))
    return jobs


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


_END = b"\x1d"
"""Ends a step and the steps inside it, so `[loop([a]), b]` and `[loop([a, b])]` differ."""


def fingerprint(workflow: Workflow) -> str:
    """What a run of `workflow` depends on besides its input: agents, loops, functions."""
    h = hashlib.blake2b(digest_size=16)
    h.update(repr((workflow.name, _qualified_name(workflow.state))).encode())
    if workflow.budget is not None:
        h.update(workflow.budget.model_dump_json().encode())
    open_paths: list[str] = []  # the step just hashed and the steps it is inside
    for path, step in walk(workflow.steps, workflow.name):
        while open_paths and not path.startswith(open_paths[-1] + "/"):  # not inside it
            open_paths.pop()
            h.update(_END)
        h.update(_step_bytes(step))
        open_paths.append(path)
    h.update(_END * len(open_paths))
    return h.hexdigest()


def _step_bytes(step: Any) -> bytes:
    match step:
        case Agent():
            own = repr((step.output_field, step.rescue, step.parallel_tools))
            return (step.key + own).encode()
        case LoopStep():
            loop = (
                "loop",
                _qualified_name(step.until),
                step.max_iterations,
                step.max_fails,
                _qualified_name(step.on_fail),
                _qualified_name(step.on_exhausted),
            )
            return repr(loop).encode()
        case ParallelStep():
            return b"parallel"
        case _:
            return repr(("function", _qualified_name(step))).encode()


def _qualified_name(fn: Any) -> str:
    """A stop condition's or tool's `name`, else `module.qualname`: unlike `callable_name`, it
    tells apart two functions that are both called `check`."""
    if fn is None:
        return ""
    name = getattr(fn, "name", None)
    if isinstance(name, str):
        return name
    return f"{getattr(fn, '__module__', '')}.{getattr(fn, '__qualname__', repr(fn))}"


async def reuse_finished(jobs: list[Job], store: Any, done: Done) -> list[Job]:
    """Hand the runs the store already finished to `done`; return the jobs still to run."""
    if store is None or not jobs:
        return list(jobs)
    found = await asyncio.to_thread(_load_finished, store, [j.run_id for j in jobs])
    todo = []
    for job in jobs:
        run = found.get(job.run_id)
        if run is None:
            todo.append(job)
        else:
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
