"""Stepping reaches every turn (inside parallel branches too), `pause()`, and `stop()` that
is `done` at once when paused and cancels a model call in flight."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from helpers import add, add_call, fail_call

from thena_nb import Agent, Event, Workflow, loop, parallel, tool, until_answered
from thena_nb.core.records.model import ModelRequest
from thena_nb.core.records.types import Turn
from thena_nb.core.runs.run import INTERRUPTED
from thena_nb.core.store.memory import MemoryRunStore
from thena_nb.models import FunctionModel, ScriptedModel, reply

pytestmark = pytest.mark.anyio


def _looping(name: str, replies: list[object]) -> Any:
    agent = Agent(name, model=ScriptedModel(replies), tools=[add])
    return loop(steps=[agent], until=until_answered)


def _review() -> Workflow:
    """A block of two looping branches and one plain agent, then an agent after it."""
    return Workflow(
        "w",
        [
            parallel(
                [
                    _looping("A", [add_call(), add_call(), "a done"]),
                    Agent("B", model=ScriptedModel(["b"])),
                    _looping("C", [add_call(), "c done"]),
                ]
            ),
            Agent("After", model=ScriptedModel(["end"])),
        ],
    )


def _shape(turn: Turn) -> tuple[Any, ...]:
    info = turn.info
    return (turn.index, turn.agent, turn.branch, turn.step_path, turn.request_key, info.response)


async def _step_all(wf: Workflow) -> tuple[list[Turn], Any]:
    s = wf.session("go", store=False)
    stepped = []
    while (turn := await s.step()) is not None:
        stepped.append(turn)
    return stepped, s.result


# -- parallel blocks, one branch turn per step ------------------------------------------------


async def test_stepping_returns_each_branch_turn_in_declaration_order() -> None:
    stepped, run = await _step_all(_review())
    assert [(t.agent, t.branch) for t in stepped] == [
        ("A", 0),
        ("A", 0),
        ("A", 0),
        ("B", 1),
        ("C", 2),
        ("C", 2),
        ("After", None),
    ]
    # Each returned turn is the one the merged run holds at that index.
    assert [_shape(t) for t in stepped] == [_shape(t) for t in run.turns]


async def test_stepping_through_a_block_gives_the_same_run_as_run() -> None:
    _, by_steps = await _step_all(_review())
    by_run = await _review().arun("go", store=False)
    assert [_shape(t) for t in by_steps.turns] == [_shape(t) for t in by_run.turns]
    assert by_steps.history == by_run.history
    assert by_steps.output == by_run.output == "end"
    assert [t.branch for t in by_steps.report.children[0].children] == [0, 1, 2]


async def test_each_branch_reads_the_history_as_the_block_opened() -> None:
    """S3 while stepping: the later branches never see the turns of the earlier ones."""
    wf = _review()
    block = wf.steps[0]
    models = [block.steps[0].steps[0].model, block.steps[1].model, block.steps[2].steps[0].model]
    s = wf.session("go", store=False)
    for _ in range(4):  # A's three turns, then B's
        await s.step()
    first_requests = [m.requests[0].messages for m in models[:2]]
    assert [m.content for m in first_requests[0]] == ["go"]
    assert first_requests[1] == first_requests[0]
    await s.step()  # C's first turn
    assert models[2].requests[0].messages == first_requests[0]


async def test_a_paused_branch_waits_before_its_model_call() -> None:
    wf = _review()
    block = wf.steps[0]
    c_model = block.steps[2].steps[0].model
    s = wf.session("go", store=False)
    for _ in range(4):
        await s.step()
    assert s.paused and s.paused_at == "model" and c_model.requests == []
    assert s.result.turns == []


async def test_open_loops_shows_the_loop_of_the_branch_being_stepped() -> None:
    outer = loop(
        steps=[
            parallel([_looping("A", [fail_call(), "a"]), Agent("B", model=ScriptedModel(["b"]))])
        ],
        until=lambda ctx: True,
    )
    s = Workflow("w", [outer]).session("go", store=False)
    await s.step()  # A's failed call
    paths = [(o.path, o.iteration, o.consecutive_fails) for o in s.open_loops]
    assert paths == [("w/0.loop", 1, 1), ("w/0.loop/0.parallel/0.loop", 2, 1)]
    await s.step()  # A answers; B is next
    assert [o.path for o in s.open_loops] == ["w/0.loop"]


async def test_open_loops_lists_the_loops_of_branches_running_together() -> None:
    """Stepped into a block of two loops, then `run()`: while both branches' model calls are
    under way, both loops are open and listed, each branch's in declaration order."""
    a, b = _Held([add_call(), "a"]), _Held(["b"])
    block = parallel(
        [
            loop(steps=[Agent("A", model=a.model, tools=[add])], until=until_answered),
            loop(steps=[Agent("B", model=b.model, tools=[add])], until=until_answered),
        ]
    )
    s = Workflow("w", [block]).session("go", store=False)
    stepping = asyncio.ensure_future(s.step())
    await a.answer()
    first = await asyncio.wait_for(stepping, 2)
    assert first is not None and first.agent == "A"  # B has not started
    assert [(o.path, o.iteration) for o in s.open_loops] == [("w/0.parallel/0.loop", 2)]
    running = asyncio.ensure_future(s.run())  # the branches now run together
    calls = [await a.entered(), await b.entered()]
    assert [(o.path, o.iteration) for o in s.open_loops] == [
        ("w/0.parallel/0.loop", 2),
        ("w/0.parallel/1.loop", 1),
    ]
    for call in calls:
        call.set_result(None)
    run = await asyncio.wait_for(running, 2)
    assert run.status == "finished" and s.open_loops == []


async def test_stepping_pauses_before_a_branch_turns_tools() -> None:
    wf = _review()
    s = wf.session("go", store=False)
    s.pause_before_tools = True
    assert await s.step() is None
    assert s.paused_at == "tools"
    turn = await s.step()
    assert turn is not None and (turn.agent, turn.branch) == ("A", 0)
    assert turn.tool_calls[0].result == "2"


async def test_nested_blocks_step_in_order_with_the_indexes_of_the_merged_run() -> None:
    def wf() -> Workflow:
        inner = parallel([_looping("B", [add_call(), "b"]), Agent("C", model=ScriptedModel(["c"]))])
        return Workflow(
            "w",
            [
                Agent("Z", model=ScriptedModel(["z"])),
                parallel([_looping("A", [add_call(), "a"]), inner]),
            ],
        )

    stepped, run = await _step_all(wf())
    assert [(t.index, t.agent) for t in stepped] == [
        (0, "Z"),
        (1, "A"),
        (2, "A"),
        (3, "B"),
        (4, "B"),
        (5, "C"),
    ]
    assert [_shape(t) for t in stepped] == [_shape(t) for t in run.turns]
    by_run = await wf().arun("go", store=False)
    assert [_shape(t) for t in by_run.turns] == [_shape(t) for t in run.turns]


async def test_run_from_inside_a_block_runs_the_branches_not_started_together() -> None:
    """S2 after stepping: once `run()` is called, the branches not started yet run at the
    same time (each model here waits for the other's call to have started)."""
    started = {"B": asyncio.Event(), "C": asyncio.Event()}

    def waits_for(other: str, me: str) -> FunctionModel:
        async def respond(request: ModelRequest) -> str:
            started[me].set()
            await asyncio.wait_for(started[other].wait(), 2)
            return me.lower()

        return FunctionModel(respond)

    wf = Workflow(
        "w",
        [
            parallel(
                [
                    Agent("A", model=ScriptedModel(["a"])),
                    Agent("B", model=waits_for("C", "B")),
                    Agent("C", model=waits_for("B", "C")),
                ]
            )
        ],
    )
    s = wf.session("go", store=False)
    first = await s.step()
    assert first is not None and first.agent == "A"
    run = await asyncio.wait_for(s.run(), 5)
    assert run.status == "finished"
    assert [t.agent for t in run.turns] == ["A", "B", "C"]


async def test_a_branch_that_raises_while_stepping_starts_no_later_branch() -> None:
    """S6 while stepping: the error names the branch and the block appends nothing."""
    later = ScriptedModel(["never"])
    broken = Agent("A", model=ScriptedModel([reply.error(RuntimeError("down"))]))
    wf = Workflow("w", [parallel([broken, Agent("B", model=later)])])
    s = wf.session("go", store=False)
    with pytest.raises(RuntimeError) as info:
        await s.step()
    assert any("parallel branch 0" in n for n in info.value.__notes__)
    assert later.requests == [] and s.result.turns == [] and s.result.status == "failed"


# -- pause() ----------------------------------------------------------------------------------


class _Held:
    """A model whose every call waits until the test lets it answer (`answer()`)."""

    def __init__(self, replies: list[object]) -> None:
        self.replies = list(replies)
        self.waiting: asyncio.Queue[asyncio.Future[None]] = asyncio.Queue()
        self.cancelled = 0
        self.model = FunctionModel(self._respond, name="held")

    async def _respond(self, request: ModelRequest) -> object:
        go: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        await self.waiting.put(go)
        try:
            await go
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        return self.replies.pop(0)

    async def entered(self) -> asyncio.Future[None]:
        """Wait until a call is under way; the future that lets it answer."""
        return await asyncio.wait_for(self.waiting.get(), 2)

    async def answer(self) -> None:
        (await self.entered()).set_result(None)


def _held_loop(held: _Held) -> Workflow:
    agent = Agent("A", model=held.model, tools=[add])
    return Workflow("w", [loop(steps=[agent], until=until_answered)])


async def test_pause_during_a_model_call_stops_before_that_turns_tools() -> None:
    held = _Held([add_call(), add_call(), "done"])
    s = _held_loop(held).session("go", store=False)
    task = asyncio.ensure_future(s.run())
    call = await held.entered()
    s.pause()
    call.set_result(None)  # the model answers; the next pause point is before its tools
    run = await asyncio.wait_for(task, 2)
    assert s.paused and not s.done and s.paused_at == "tools"
    assert run.turns == [] and run.status == "running" and s.breakpoint_hit is None
    task = asyncio.ensure_future(s.run())  # the tools run, then the next turns
    await held.answer()
    await held.answer()
    run = await asyncio.wait_for(task, 2)
    assert s.done and run.status == "finished" and len(run.turns) == 3
    assert run.turns[0].tool_calls[0].ok


async def test_pause_between_turns_stops_at_the_next_model_call() -> None:
    held = _Held([add_call(), add_call(), "done"])
    s = _held_loop(held).session("go", store=False)
    s.subscribe(lambda e: s.pause() if e.kind == "turn_finished" else None)
    task = asyncio.ensure_future(s.run())
    await held.answer()
    run = await asyncio.wait_for(task, 2)
    assert s.paused and s.paused_at == "model"
    assert len(run.turns) == 1 and run.turns[0].tool_calls[0].ok


async def test_pause_stops_before_tools_when_pausing_there() -> None:
    held = _Held([add_call(), "done"])
    s = _held_loop(held).session("go", store=False)
    s.pause_before_tools = True
    ran: list[Event] = []
    s.subscribe(lambda e: ran.append(e) if e.kind == "tool_started" else None)
    task = asyncio.ensure_future(s.run())
    call = await held.entered()
    s.pause()
    call.set_result(None)
    await asyncio.wait_for(task, 2)
    assert s.paused and s.paused_at == "tools" and ran == [] and s.result.turns == []
    turn = await s.step()  # the tools run: the turn is recorded
    assert turn is not None and turn.tool_calls[0].result == "2" and len(ran) == 1
    assert s.paused_at == "model"


async def test_pause_does_nothing_to_a_session_that_is_not_running() -> None:
    s = _held_loop(_Held(["done"])).session("go", store=False)
    s.pause()
    assert not s.paused and s.task is None


# -- stop() ------------------------------------------------------------------------------------


async def test_stop_while_paused_is_done_at_once() -> None:
    events: list[str] = []
    store = MemoryRunStore()
    s = Workflow(
        "w",
        [
            loop(
                steps=[Agent("A", model=ScriptedModel([add_call()] * 3), tools=[add])],
                until=until_answered,
            )
        ],
    ).session("go", store=store)
    s.subscribe(lambda e: events.append(e.kind))
    await s.step()
    assert s.paused
    s.stop()
    assert s.done and not s.paused and not s.running
    assert s.result.status == "stopped" and s.result.loops[0].stop_reason == "stop"
    run = await s.run()  # waits for the run's ending to be stored
    assert run.status == "stopped" and len(run.turns) == 1
    assert store.load(run.run_id).status == "stopped"
    assert events.count("run_finished") == 1
    assert await s.step() is None


async def test_stop_while_paused_before_tools_records_no_unfinished_turn() -> None:
    model = ScriptedModel([add_call(), "never"])
    s = Workflow(
        "w", [loop(steps=[Agent("A", model=model, tools=[add])], until=until_answered)]
    ).session("go", store=False)
    s.pause_before_tools = True
    assert await s.step() is None and s.paused_at == "tools"
    s.stop()
    assert s.done
    run = await s.run()
    assert run.status == "stopped" and run.turns == []
    assert [m.role for m in run.history] == ["user"]  # the call's message went with its turn


async def test_stop_while_paused_in_a_branch_keeps_the_branch_turns_that_finished() -> None:
    s = _review().session("go", store=False)
    for _ in range(4):  # A's three turns and B's
        await s.step()
    s.stop()
    assert s.done and s.result.status == "stopped"
    run = await s.run()
    assert [t.agent for t in run.turns] == ["A", "A", "A", "B"]
    assert run.report.children[0].children[2].stop_reason == "stop"  # C's loop


async def test_stop_during_a_model_call_cancels_it_and_records_no_turn() -> None:
    held = _Held([add_call()])
    store = MemoryRunStore()
    s = _held_loop(held).session("go", store=store)
    task = asyncio.ensure_future(s.run())
    await held.entered()  # the model waits forever: nothing will let it answer
    s.stop()
    run = await asyncio.wait_for(task, 2)
    assert held.cancelled == 1
    assert run.status == "stopped" and run.turns == [] and s.done
    assert run.loops[0].stop_reason == "stop"
    assert run.usage.model_calls == 1
    loaded = store.load(run.run_id)
    assert loaded.status == "stopped" and loaded.turns == []


async def test_stop_during_a_stepped_model_call_ends_the_step() -> None:
    held = _Held([add_call()])
    s = _held_loop(held).session("go", store=False)
    task = asyncio.ensure_future(s.step())
    await held.entered()
    s.stop()
    assert await asyncio.wait_for(task, 2) is None
    assert held.cancelled == 1 and s.done and s.result.status == "stopped"


async def test_a_cancelled_run_without_stop_is_still_cancelled() -> None:
    """Only `stop()` turns a cancelled model call into a `Halt`; another cancellation (a
    kernel interrupt) still raises `CancelledError`, the run ending `stopped` (interrupted)."""
    held = _Held([add_call()])
    s = _held_loop(held).session("go", store=False)
    runner = asyncio.ensure_future(s.run())
    await held.entered()
    assert s.task is not None
    s.task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(runner, 2)
    assert s.result.status == "stopped" and held.cancelled == 1
    assert s.result.error == INTERRUPTED


async def test_stop_during_an_async_tool_cancels_it_and_keeps_its_turn() -> None:
    """A tool under way is cancelled like a model call: its call fails saying it was
    stopped, and the turn (whose model call was made) is kept."""
    inside, finish = asyncio.Event(), asyncio.Event()

    @tool
    async def slow() -> str:
        """Takes until the test lets it finish."""
        inside.set()
        await finish.wait()
        return "finished"

    model = ScriptedModel([reply.tool("slow"), "never"])
    wf = Workflow("w", [loop(steps=[Agent("A", model=model, tools=[slow])], until=until_answered)])
    s = wf.session("go", store=False)
    task = asyncio.ensure_future(s.run())
    await asyncio.wait_for(inside.wait(), 2)
    s.stop()
    run = await asyncio.wait_for(task, 2)
    assert run.status == "stopped" and len(model.requests) == 1
    (call,) = run.turns[0].tool_calls
    assert call.ok is False and call.result is None
    assert call.error == (
        "Error: tool 'slow' {} was stopped while it ran (the run was stopped) and was cancelled."
    )
    assert run.loops[0].stop_reason == "stop" and run.error is None
