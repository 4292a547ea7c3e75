"""The run store contract: the suite every run store passes, for a store of your own.

`MemoryRunStore` and `SqliteRunStore` pass it unchanged (`tests/store/test_contract.py`),
and so can any store that implements `thena_nb.store.RunStore`. It round-trips finished,
failed, waiting and half-finished runs, parallel branches and what each model was sent; it
checks listing, deleting, run ids given again, and that a turn is stored before the next
starts (S28). It needs pytest and anyio (both in the `dev` extra); `import thena_nb` never
loads this module.

Give your tests two fixtures in a `conftest.py`: `store`, the store under test, and
`reader`, a second view of the same storage (another connection to it; for a store that
lives in memory, `store` itself):

```python
import pytest
from my_package import MyStore

pytest.register_assert_rewrite("thena_nb.store_contract")  # failures show the values


@pytest.fixture
def store(tmp_path):
    with MyStore(tmp_path / "runs.db") as store:
        yield store


@pytest.fixture
def reader(store, tmp_path):
    with MyStore(tmp_path / "runs.db") as reader:
        yield reader
```

Then one test module takes in the whole suite, every test of `__all__`:

```python
from thena_nb.store_contract import *  # noqa: F403
```
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from pydantic import BaseModel

from thena_nb import (
    Agent,
    Context,
    Decision,
    Run,
    Workflow,
    loop,
    parallel,
    tool,
    until_answered,
)
from thena_nb.models import FunctionModel, ModelRequest, ScriptedModel, reply
from thena_nb.store import RunInUse, RunStore, StoreError

__all__ = [
    "test_a_failed_run_keeps_its_turns_and_error",
    "test_a_finished_run_round_trips",
    "test_a_resumed_waiting_run_is_stored_with_no_pending_calls",
    "test_a_run_that_never_finished_is_rebuilt_from_its_turns",
    "test_a_stored_run_id_given_again_is_refused_and_the_stored_run_kept",
    "test_a_waiting_runs_pending_calls_round_trip",
    "test_branch_messages_not_yet_stored_are_rebuilt",
    "test_every_load_is_a_fresh_copy",
    "test_runs_are_listed_in_the_order_they_started",
    "test_s28_a_turn_is_stored_before_the_next_starts",
    "test_the_same_run_id_again_replaces_the_stale_turns",
    "test_turns_are_stored_in_index_order",
    "test_unknown_runs_and_delete",
    "test_what_each_model_was_sent_loads_with_its_turn",
]


class Notes(BaseModel):
    items: list[str] = []
    verdict: str = ""


@tool
def note(ctx: Context, text: str) -> str:
    """Write a note."""
    ctx.state.items.append(text)
    return f"noted {text}"


@tool
def fail(reason: str = "boom") -> str:
    """Always raises."""
    raise ValueError(reason)


@tool(rescue=False)
def secret() -> str:
    """Never called from text."""
    return "nope"


def review() -> Workflow:
    """Parallel branches, then a loop with native, rescued, refused and failing calls."""
    a = Agent("Security", model=ScriptedModel(["security ok"], name="sec"))
    b = Agent("Perf", model=ScriptedModel(["perf ok"], name="perf"))
    worker = Agent(
        "Worker",
        model=ScriptedModel(
            [
                reply.tool("note", text="one", input_tokens=10, output_tokens=3),
                reply.tool("fail"),
                'Calling {"name": "note", "arguments": {"text": "two"}}',
                '{"name": "secret", "arguments": {}}',
                reply.text("all done", input_tokens=7, output_tokens=2),
            ]
        ),
        tools=[note, fail, secret],
        output_field="verdict",
    )
    return Workflow(
        "review",
        [parallel([a, b]), loop(steps=[worker], until=until_answered, max_fails=math.inf)],
        state=Notes,
    )


def gated(ran: list[tuple[str, Any]]) -> Workflow:
    """One turn of four calls that ends the run `"waiting"`: `pay` over 100 and every
    `refund` wait for a decision, a `pay` without its amount is held because its gate raises
    (`gate_error`), and `note` is not gated. Each tool that runs appends to `ran`."""

    @tool(gate=lambda call: call.arguments["amount"] > 100)
    def pay(amount: int = 0) -> str:
        """Pay an amount."""
        ran.append(("pay", amount))
        return f"paid {amount}"

    @tool(gate=True)
    def refund(amount: int) -> str:
        """Refund an amount."""
        ran.append(("refund", amount))
        return f"refunded {amount}"

    @tool(name="note")
    def jot(text: str) -> str:
        """Write a note."""
        ran.append(("note", text))
        return "noted"

    def clerk(request: ModelRequest) -> Any:
        if request.messages[-1].role == "tool":
            return "All done."
        first = [("pay", {"amount": 500}), ("pay", {}), ("refund", {"amount": 7})]
        return reply.calls([*first, ("note", {"text": "paid"})])

    agent = Agent("Clerk", model=FunctionModel(clerk), tools=[pay, refund, jot])
    return Workflow("shop", [loop(steps=[agent], until=until_answered, max_iterations=4)])


def dump_turns(run: Run) -> list[dict[str, Any]]:
    return [t.model_dump() for t in run.turns]


def test_a_finished_run_round_trips(store: RunStore, reader: RunStore) -> None:
    run = review().run("review this", store=store)
    assert run.status == "finished" and len(run.turns) == 7
    sources = [c.source for t in run.turns for c in t.tool_calls]
    assert sources == ["native", "native", "rescued", "rescued"]

    loaded = reader.load(run.run_id)
    assert loaded is not run and loaded.workflow is None
    assert (loaded.run_id, loaded.workflow_name, loaded.input) == (run.run_id, "review", run.input)
    assert (loaded.status, loaded.error, loaded.output) == ("finished", None, "all done")
    assert dump_turns(loaded) == dump_turns(run)
    assert loaded.history == run.history
    assert loaded.report == run.report and loaded.loops[0].max_fails == math.inf
    assert loaded.usage == run.usage and loaded.usage.input_tokens == 17
    assert loaded.stop_reasons == run.stop_reasons == {"review/1.loop": "until"}
    assert loaded.state == {"items": ["one", "two"], "verdict": "all done"}
    assert loaded.states == run.states and loaded.states[2] == {"items": ["one"], "verdict": ""}
    assert (loaded.started_at, loaded.finished_at) == (run.started_at, run.finished_at)
    # The refused rescued call keeps its refusal in the assistant message, as the model saw it.
    refused = loaded.history[-3].tool_calls[0]
    assert refused.name == "secret" and refused.ok is False and refused.error
    assert Run.from_json(loaded.to_json()).history == run.history


def test_every_load_is_a_fresh_copy(store: RunStore) -> None:
    run = review().run("x", store=store)
    first = store.load(run.run_id)
    first.history.clear()
    first.states[2]["items"].append("changed")
    first.report.children.clear()
    again = store.load(run.run_id)
    assert again.history == run.history and again.states == run.states
    assert again.report == run.report


def test_runs_are_listed_in_the_order_they_started(store: RunStore) -> None:
    wf = review()
    ids = [wf.run(f"input {i}", store=store).run_id for i in range(3)]
    rows = store.list_runs()
    assert [r["run_id"] for r in rows] == ids
    row = rows[0]
    assert set(row) == {
        "run_id",
        "workflow",
        "input",
        "status",
        "stop_reasons",
        "turns",
        "input_tokens",
        "output_tokens",
        "started_at",
        "finished_at",
        "error",
        "parent_run_id",
        "forked_at",
    }
    assert (row["workflow"], row["input"], row["status"]) == ("review", "input 0", "finished")
    assert (row["parent_run_id"], row["forked_at"]) == (None, None)
    assert (row["turns"], row["input_tokens"], row["output_tokens"]) == (7, 17, 5)
    assert row["stop_reasons"] == {"review/1.loop": "until"}
    assert row["started_at"] < row["finished_at"]


def test_turns_are_stored_in_index_order(store: RunStore, reader: RunStore) -> None:
    run = review().run("x", store=store)
    loaded = reader.load(run.run_id)
    assert [t.index for t in loaded.turns] == list(range(7))
    assert [t.agent for t in loaded.turns] == ["Security", "Perf", *["Worker"] * 5]


@pytest.mark.anyio
async def test_s28_a_turn_is_stored_before_the_next_starts(
    store: RunStore, reader: RunStore
) -> None:
    """S28: when a model call starts, every earlier turn is already in the store."""
    seen: list[tuple[int, list[int]]] = []
    run_ids: list[str] = []

    def respond(request: Any) -> Any:
        stored = reader.load(run_ids[0])
        seen.append((len(stored.turns), sorted(stored.states)))
        return reply.tool("note", text="x") if len(seen) < 4 else "done"

    agent = Agent("A", model=FunctionModel(respond), tools=[note])
    wf = Workflow("w", [loop(steps=[agent], until=until_answered)], state=Notes)
    session = wf.session("go", store=store, run_id="s28")
    run_ids.append(session.result.run_id)
    await session.run()
    assert seen == [(0, []), (1, [0]), (2, [0, 1]), (3, [0, 1, 2])]


@pytest.mark.anyio
async def test_a_run_that_never_finished_is_rebuilt_from_its_turns(
    store: RunStore, reader: RunStore
) -> None:
    """A run stopped mid-way (as a killed process leaves it) loads with its history, state,
    usage and a report tree rebuilt from the turns."""
    session = review().session("go", store=store)
    await session.step()  # the parallel block: one step per branch turn
    await session.step()
    await session.step()
    await session.step()
    live = session.result
    loaded = reader.load(live.run_id)
    assert loaded.status == "running" and loaded.finished_at is None
    assert dump_turns(loaded) == dump_turns(live)
    assert loaded.history == live.history
    assert loaded.states == live.states and loaded.state == live.states[3]
    assert loaded.output == live.turns[-1].info.response
    assert loaded.usage == live.usage
    # (The paused session has already placed the next agent's node, with no turn yet.)
    assert [(n.kind, n.path) for n in loaded.report.walk()] == [
        (n.kind, n.path) for n in live.report.walk() if n.kind != "agent" or n.turns
    ]
    assert [n.turn_indexes() for n in loaded.loops] == [n.turn_indexes() for n in live.loops]
    assert loaded.loops[0].iterations == 2 and loaded.loops[0].stop_reason is None
    assert [c.iteration for c in loaded.loops[0].children] == [1, 2]
    assert [c.branch for c in loaded.report.children[0].children] == [0, 1]
    await session.run()
    assert reader.load(live.run_id).history == live.history


@pytest.mark.anyio
async def test_branch_messages_not_yet_stored_are_rebuilt(
    store: RunStore, reader: RunStore
) -> None:
    """Each parallel branch turn is stored with its own messages when the block merges, so
    stopping right after the block loads the whole history. Before the merge it is kept as
    a turn of the open block (`run.open_turns`), for a resume to reuse."""
    session = review().session("go", store=store)
    await session.step()  # the first branch's turn: stored as the block's, not the run's
    early = reader.load(session.result.run_id)
    assert early.turns == [] and [t.agent for t in early.open_turns] == ["Security"]
    assert early.open_turns[0].info.response == "security ok"
    await session.step()
    loaded = reader.load(session.result.run_id)
    assert [t.agent for t in loaded.turns] == ["Security", "Perf"]
    assert loaded.history == session.result.history and loaded.open_turns == []
    session.stop()


def test_a_failed_run_keeps_its_turns_and_error(store: RunStore, reader: RunStore) -> None:
    model = ScriptedModel([reply.tool("note", text="a"), reply.error(RuntimeError("gone"))])
    wf = Workflow("w", [loop(steps=[Agent("A", model=model, tools=[note])], until=until_answered)])
    with pytest.raises(RuntimeError) as info:
        wf.run("go", store=store)
    run: Run = info.value.run  # type: ignore[attr-defined]
    loaded = reader.load(run.run_id)
    assert loaded.status == "failed" and loaded.error == "RuntimeError: gone"
    assert dump_turns(loaded) == dump_turns(run) and len(loaded.turns) == 1
    assert loaded.history == run.history
    assert reader.list_runs()[0]["status"] == "failed"


def test_a_waiting_runs_pending_calls_round_trip(store: RunStore, reader: RunStore) -> None:
    """The calls a waiting run holds for a decision load as they were: each call, its
    turn, agent and step, why a gate that raised held it, and the waiting turn."""
    ran: list[tuple[str, Any]] = []
    run = gated(ran).run("settle", store=store)
    assert run.status == "waiting" and ran == [] and run.turns == []
    assert [p.gate_error for p in run.pending] == [None, "KeyError: 'amount'", None]
    loaded = reader.load(run.run_id)
    assert (loaded.status, loaded.turns) == ("waiting", [])
    assert loaded.pending == run.pending
    assert [(p.call.name, p.call.arguments) for p in loaded.pending] == [
        ("pay", {"amount": 500}),
        ("pay", {}),
        ("refund", {"amount": 7}),
    ]
    assert {(p.turn_index, p.agent, p.step_path) for p in loaded.pending} == {
        (0, "Clerk", "shop/0.loop/0.Clerk")
    }
    assert loaded.pending_turn is not None and run.pending_turn is not None
    assert loaded.pending_turn.model_dump() == run.pending_turn.model_dump()
    assert [c.name for c in loaded.pending_turn.tool_calls] == ["pay", "pay", "refund", "note"]
    assert reader.list_runs()[0]["status"] == "waiting"
    assert Run.from_json(loaded.to_json()).pending == run.pending


def test_a_resumed_waiting_run_is_stored_with_no_pending_calls(
    store: RunStore, reader: RunStore
) -> None:
    """Resumed with its decisions (through the second reader), the run finishes, and what
    the store keeps of it holds no pending call any more."""
    ran: list[tuple[str, Any]] = []
    wf = gated(ran)
    run = wf.run("settle", store=store)
    big, bare, refund = (p.call.id for p in run.pending)
    decisions = {
        big: Decision.edit({"amount": 50}),
        bare: Decision.reject("no amount"),
        refund: Decision.approve(),
    }
    done = wf.resume(run.run_id, store=reader, decisions=decisions)
    assert done.status == "finished" and ran == [("pay", 50), ("refund", 7), ("note", "paid")]
    loaded = store.load(run.run_id)
    assert (loaded.status, loaded.pending, loaded.pending_turn) == ("finished", [], None)
    assert loaded.turns[0].tool_calls[0].original_arguments == {"amount": 500}
    assert [r["status"] for r in store.list_runs()] == ["finished"]


def test_unknown_runs_and_delete(store: RunStore) -> None:
    with pytest.raises(StoreError, match=r"no run 'nope' in the store; it holds no runs"):
        store.load("nope")
    run = review().run("x", store=store)
    with pytest.raises(StoreError, match=rf"no run 'nope'.*{run.run_id}.*runs\(\)"):
        store.load("nope")
    store.delete(run.run_id)
    store.delete(run.run_id)  # deleting twice is fine
    assert store.list_runs() == []
    with pytest.raises(StoreError):
        store.load(run.run_id)


def test_a_stored_run_id_given_again_is_refused_and_the_stored_run_kept(store: RunStore) -> None:
    """`wf.run(..., run_id=<a stored id>)` never replaces a stored run silently, also one of
    another workflow: it is refused before anything runs, and the stored run is kept."""
    asked = ScriptedModel(["never"])
    first = Workflow("first", [Agent("A", model=ScriptedModel(["kept"]))])
    first.run("one", run_id="same", store=store)
    for name in ("first", "other"):
        wf = Workflow(name, [Agent("A", model=asked)])
        with pytest.raises(RunInUse, match=r"run 'same' is stored already .*overwrite=True"):
            wf.run("two", run_id="same", store=store)
    assert asked.requests == []
    loaded = store.load("same")
    assert (loaded.workflow_name, loaded.input, loaded.output) == ("first", "one", "kept")
    assert [r["status"] for r in store.list_runs()] == ["finished"]


def test_the_same_run_id_again_replaces_the_stale_turns(store: RunStore) -> None:
    """A run id used again with `overwrite=True` by a run that asks other things keeps none
    of the old turns."""
    long = Workflow(
        "w",
        [
            loop(
                steps=[
                    Agent(
                        "A",
                        model=ScriptedModel([reply.tool("note", text="a")] * 3 + ["x"]),
                        tools=[note],
                    )
                ],
                until=until_answered,
            )
        ],
        state=Notes,
    )
    long.run("first", run_id="same", store=store)
    short = Workflow("w", [Agent("A", model=ScriptedModel(["only"]))])
    short.run("second", run_id="same", store=store, overwrite=True)
    loaded = store.load("same")
    assert loaded.input == "second" and len(loaded.turns) == 1 and loaded.output == "only"
    assert loaded.states == {} and [r["turns"] for r in store.list_runs()] == [1]


@pytest.mark.anyio
async def test_what_each_model_was_sent_loads_with_its_turn(
    store: RunStore, reader: RunStore
) -> None:
    """`run.request_of(turn)` of a loaded run is what the live run gives, mid-run too: the
    system prompts and tool specs a turn's request refers to are stored with it."""
    session = review().session("go", store=store)
    for _ in range(3):  # the parallel block's two branch turns, then the next turn
        await session.step()
    live = session.result
    assert len(live.turns) == 3
    mid = reader.load(live.run_id)
    assert [mid.request_of(t) for t in range(3)] == [live.request_of(t) for t in range(3)]
    await session.run()
    loaded = reader.load(live.run_id)
    assert loaded.request_parts == live.request_parts and len(live.request_parts) == 3
    sent = [loaded.request_of(t) for t in range(len(loaded.turns))]
    assert sent == [live.request_of(t) for t in range(len(live.turns))]
    assert [m.content for m in sent[1].messages] == ["go"]  # a branch saw the block's start
    assert [t.name for t in sent[-1].tools] == ["note", "fail", "secret"]
    assert len(sent[-1].messages) == len(live.history) - 1
