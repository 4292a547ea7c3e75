"""The plan of an experiment: its jobs and their run ids, and which jobs the store already did."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal

from thena_nb.core.agent import Agent
from thena_nb.core.changes import Changes, apply_changes
from thena_nb.core.errors import StoreError
from thena_nb.core.report import Run
from thena_nb.core.steps import LoopStep, ParallelStep
from thena_nb.core.workflow import Workflow

__all__ = ["BASE_VARIANT", "Backend", "Job", "Plan", "fingerprint", "reuse_finished"]

Backend = Literal["local", "ray"]

BASE_VARIANT = "base"
"""The variant name of an experiment run without `variants`."""

_REUSABLE = ("finished", "budget", "stopped")
"""Statuses of stored runs that a re-run takes as they are; failed runs run again."""


@dataclasses.dataclass(frozen=True)
class Job:
    """One run to make: an input under a variant, and its place among the experiment's runs."""

    slot: int
    input: str
    variant: str
    run_id: str


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

    @classmethod
    def of(
        cls,
        workflow: Workflow,
        inputs: Iterable[Any],
        variants: Mapping[str, Changes] | None,
        *,
        concurrency: int,
        backend: Backend,
    ) -> Plan:
        """The jobs of an experiment, in (input, variant) order, with every variant built.

        Raises:
            TypeError: `inputs` is a single string.
            ValueError: Bad `variants`, `concurrency` or `backend`.
        """
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
        prints = {name: fingerprint(wf) for name, wf in built.items()}
        seen: Counter[str] = Counter()
        jobs: list[Job] = []
        for text in texts:
            occurrence = seen[text]
            seen[text] += 1
            for name in chosen:
                run_id = _run_id(workflow.name, name, prints[name], text, occurrence)
                jobs.append(Job(len(jobs), text, name, run_id))
        return cls(workflow, texts, chosen, built, jobs, concurrency, backend)


def _run_id(workflow_name: str, variant: str, fingerprint: str, input: str, occurrence: int) -> str:
    """The same run of the same experiment gets the same id, in any process."""
    key = f"{workflow_name}\x1f{variant}\x1f{fingerprint}\x1f{occurrence}\x1f{input}"
    return hashlib.blake2b(key.encode(), digest_size=6).hexdigest()


def fingerprint(workflow: Workflow) -> str:
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


async def reuse_finished(
    jobs: list[Job], store: Any, done: Callable[[Job, Run], None]
) -> list[Job]:
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
