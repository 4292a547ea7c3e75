"""The Ray backend: workers that each run many runs at once (so `concurrency` holds across
them), a dead worker that fails only its runs in flight, models used here that can still be
sent, and an error that names what cannot be sent."""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from messages_api_server import MessagesAPIServer, text

from thena_nb import Agent, Decision, Workflow, loop, tool, until_answered
from thena_nb.core.records.model import ModelRequest, Reply
from thena_nb.models import AnthropicModel, FunctionModel, reply
from thena_nb.store import MemoryRunStore

pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def ray_two_cpus() -> Iterator[Any]:
    """A Ray instance with 2 CPUs on this machine, shared by this module's tests."""
    import ray

    # Send this file's classes by value, as a notebook's are (workers cannot import it).
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


class Sleepy:
    """Answers after `delay` seconds; the process exits on the input `"crash"`."""

    name = "sleepy"

    def __init__(self, delay: float) -> None:
        self.delay = delay

    async def respond(self, request: ModelRequest) -> Reply:
        if request.messages[0].content == "crash":
            await asyncio.sleep(self.delay / 2)
            os._exit(1)  # the worker process dies, as it would on a segfault or OOM kill
        await asyncio.sleep(self.delay)
        return reply.text(f"done {request.messages[0].content}")


def most_at_once(runs: list[Any]) -> int:
    """The most runs that were going at the same moment."""
    edges = sorted([(r.started_at, 1) for r in runs] + [(r.finished_at, -1) for r in runs])
    now = peak = 0
    for _, step in edges:
        now += step
        peak = max(peak, now)
    return peak


def test_ray_workers_run_as_many_runs_at_once_as_concurrency_asks(ray_two_cpus: Any) -> None:
    wf = Workflow("sleepy", [Agent("A", model=Sleepy(1.0))])
    exp = wf.map([f"q{i}" for i in range(24)], concurrency=24, backend="ray", store=False,
                 progress=False)  # fmt: skip
    assert [r.status for r in exp.runs] == ["finished"] * 24
    assert most_at_once(exp.runs) >= 20  # one run per CPU would be 2


def test_a_dead_ray_worker_fails_only_its_runs_in_flight(ray_two_cpus: Any) -> None:
    wf = Workflow("sleepy", [Agent("A", model=Sleepy(0.4))])
    inputs = [f"q{i}" for i in range(6)] + ["crash"] + [f"q{i}" for i in range(6, 14)]
    store = MemoryRunStore()
    exp = wf.map(inputs, concurrency=4, backend="ray", store=store, progress=False)
    frame = exp.frame()
    assert len(frame) == len(inputs)  # no exception: every run has its row
    crashed = frame[frame["input"] == "crash"].iloc[0]
    assert crashed["status"] == "failed" and "Ray worker" in crashed["error"]
    failed = frame[frame["status"] == "failed"]
    assert len(failed) <= 4  # at most the runs in flight then
    assert all("died" in error for error in failed["error"])
    assert (frame["status"] == "finished").sum() >= len(inputs) - 4
    finished_ids = [rid for rid, s in zip(exp.run_ids, frame["status"], strict=True)
                    if s == "finished"]  # fmt: skip
    assert all(store.load(rid).status == "finished" for rid in finished_ids)


def test_an_anthropic_model_used_here_once_can_still_be_sent_to_ray(ray_two_cpus: Any) -> None:
    with MessagesAPIServer() as server:
        server.script(*[text("Hello") for _ in range(4)])
        model = AnthropicModel("claude-test", base_url=server.base_url, api_key="k")
        wf = Workflow("hello", [Agent("A", model=model)])
        assert wf.run("here", store=False).output == "Hello"  # its client now exists
        exp = wf.map(["a", "b", "c"], backend="ray", store=False, progress=False)
    assert [r.output for r in exp.runs] == ["Hello"] * 3


def test_what_cannot_be_sent_to_ray_is_named(ray_two_cpus: Any) -> None:
    lock = threading.Lock()

    @tool
    def locked(q: str) -> str:
        """Answers under a lock."""
        with lock:
            return q

    wf = Workflow("w", [Agent("Finder", model=Sleepy(0.0), tools=[locked])])
    with pytest.raises(TypeError) as caught:
        wf.map(["a"], backend="ray", store=False, progress=False)
    message = str(caught.value)
    assert "the tools[0] 'locked' of agent 'Finder'" in message
    assert "cannot pickle '_thread.lock'" in message
    assert "_repr_html_" not in message


def test_approve_reaches_the_ray_workers(ray_two_cpus: Any) -> None:
    """`wf.map(approve=)` decides the gated calls of runs on Ray workers too."""

    @tool(gate=lambda call: True)
    def pay(amount: int) -> str:
        """Pay an amount."""
        return f"paid {amount}"

    def clerk(request: ModelRequest) -> Any:
        if request.messages[-1].role == "tool":
            return "Paid."
        return reply.tool("pay", amount=int(request.messages[0].content))

    agent = Agent("Clerk", model=FunctionModel(clerk), tools=[pay])
    wf = Workflow("shop", [loop(steps=[agent], until=until_answered)])
    exp = wf.map(["5", "7"], backend="ray", approve=lambda p: Decision.reject("no"),
                 store=False, progress=False)  # fmt: skip
    calls = [r.turns[0].tool_calls[0] for r in exp.runs]
    assert [(c.decision, c.ok) for c in calls] == [("reject", False)] * 2
    assert [r.status for r in exp.runs] == ["finished"] * 2
