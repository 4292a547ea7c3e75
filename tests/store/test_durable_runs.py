"""Durable runs through a store: replay, fork, resume, what-if, changes and the runs frame."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from pydantic import BaseModel

from thena_nb import (
    Agent,
    Budget,
    Context,
    Run,
    Workflow,
    loop,
    max_tool_calls,
    parallel,
    runs,
    tool,
    until_answered,
    until_text,
    was_exhausted,
)
from thena_nb.core.parts.changes import apply_changes
from thena_nb.core.records.errors import StoreError
from thena_nb.core.runs.what_if import RecordedContext, WhatIf, what_if, what_if_context
from thena_nb.models import FunctionModel, ScriptedModel, reply
from thena_nb.notebook.frames import RUNS_COLUMNS
from thena_nb.store import MemoryRunStore, RunStore, SqliteRunStore

STRIP = {"started_at", "duration_s", "replayed", "attempts", "cost_usd", "saved_usd"}
SPENT = {"known_cost_usd", "unpriced_turns", "saved_usd"}  # a replay spends nothing


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RunStore]:
    if request.param == "memory":
        yield MemoryRunStore()
    else:
        with SqliteRunStore.from_path(tmp_path / "runs.sqlite3") as store:
            yield store


class Counter:
    """Tools that count their own runs."""

    def __init__(self) -> None:
        self.ran: list[tuple[str, Any]] = []
        self.flaky_left = 1

        @tool
        def add(a: int, b: int) -> int:
            """Add two numbers."""
            self.ran.append(("add", a))
            return a + b

        @tool(retries=2)
        def flaky(x: int) -> int:
            """Fails once, then works."""
            self.ran.append(("flaky", x))
            if self.flaky_left:
                self.flaky_left -= 1
                raise ConnectionError("reset")
            return x

        @tool
        def fail() -> str:
            """Always raises."""
            self.ran.append(("fail", None))
            raise ValueError("boom")

        self.tools = [add, flaky, fail]


def review(counter: Counter) -> tuple[Workflow, list[ScriptedModel]]:
    a = ScriptedModel(["security ok"], name="a")
    b = ScriptedModel(["perf ok"], name="b")
    worker = ScriptedModel(
        [
            reply.tool("add", a=1, b=2, input_tokens=5, output_tokens=2),
            reply.tool("flaky", x=7),
            reply.tool("fail"),
            '{"name": "add", "arguments": {"a": 2, "b": 3}}',
            "done",
        ]
    )
    wf = Workflow(
        "review",
        [
            parallel([Agent("A", model=a), Agent("B", model=b)]),
            loop(steps=[Agent("Worker", model=worker, tools=counter.tools)], until=until_answered),
        ],
    )
    return wf, [a, b, worker]


def adding(n: int, *, model: Any = None, name: str = "Calc", system: str = "") -> Workflow:
    """A loop whose agent calls `add` `n - 1` times, then answers."""
    replies: list[Any] = [reply.tool("add", a=i, b=1) for i in range(n - 1)] + ["done"]

    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    agent = Agent(name, model=model or ScriptedModel(replies), tools=[add], system=system)
    return Workflow("adding", [loop(steps=[agent], until=until_answered, max_iterations=50)])


# -- replay ----------------------------------------------------------------------------------


def test_replay_from_the_store_makes_no_model_or_tool_call(store: RunStore) -> None:
    counter = Counter()
    wf, models = review(counter)
    first = wf.run("go", store=store)
    assert first.turns[3].tool_calls[0].retries == 1 and first.turns[3].tool_calls[0].ok
    ran = list(counter.ran)
    for m in models:
        m.requests.clear()

    loaded = Run.load(first.run_id, store=store)
    again = wf.run("go", replay=loaded, store=False)
    assert [len(m.requests) for m in models] == [0, 0, 0]
    assert counter.ran == ran  # no tool ran again, the flaky one included
    assert again.replay_diverged_at is None
    assert all(t.replayed and t.attempts == 0 for t in again.turns)
    assert [t.model_dump(exclude=STRIP) for t in again.turns] == [
        t.model_dump(exclude=STRIP) for t in first.turns
    ]
    assert again.turns[3].tool_calls[0].retries == 1  # recorded retries come back as they were
    assert again.stop_reasons == first.stop_reasons == {"review/1.loop": "until"}
    assert again.history == first.history
    assert again.usage.model_dump(exclude=SPENT) == first.usage.model_dump(exclude=SPENT)


def test_replay_restores_state_snapshots_from_the_store(store: RunStore) -> None:
    class Notes(BaseModel):
        items: list[str] = []

    @tool
    def note(ctx: Context, text: str) -> str:
        """Note it."""
        ctx.state.items.append(text)
        return "ok"

    replies: list[Any] = [reply.tool("note", text="x"), reply.tool("note", text="y"), "done"]
    agent = Agent("A", model=ScriptedModel(replies), tools=[note])
    wf = Workflow("w", [loop(steps=[agent], until=until_answered)], state=Notes)
    first = wf.run("go", store=store)
    again = wf.run("go", replay=store.load(first.run_id), store=False)
    assert again.state == Notes(items=["x", "y"])


# -- fork ------------------------------------------------------------------------------------


@pytest.mark.parametrize("at", [0, 2, 5])
def test_fork_at_k_makes_exactly_the_live_calls_after_k(store: RunStore, at: int) -> None:
    first = adding(6).run("go", store=store)
    loaded = store.load(first.run_id)
    live = ScriptedModel(["answered early"], name="scripted")
    forked = loaded.fork(at, workflow=adding(6, model=live), store=store)
    assert [t.replayed for t in forked.turns] == [True] * at + [False]
    assert len(live.requests) == 1 and forked.output == "answered early"
    assert forked.run_id != first.run_id
    assert store.load(forked.run_id).output == "answered early"
    assert len(store.list_runs()) == 2


def test_fork_with_changes_reuses_the_turns_before_k(store: RunStore) -> None:
    """A changed prompt changes every request; the fork still keeps turns 0..k-1."""
    first = adding(5).run("go", store=store)
    live = ScriptedModel([reply.tool("add", a=9, b=9), "brief answer"])
    forked = store.load(first.run_id).fork(
        3,
        workflow=adding(5),
        changes={"Calc": {"system": "Be brief.", "model": live}},
        store=False,
    )
    assert [t.replayed for t in forked.turns] == [True, True, True, False, False]
    assert len(live.requests) == 2
    assert all(r.system == "Be brief." for r in live.requests)
    assert len(live.requests[0].messages) == 1 + 2 * 3  # it saw the three reused turns
    assert forked.output == "brief answer" and forked.replay_diverged_at is None


def test_fork_of_a_live_run_uses_its_own_workflow() -> None:
    wf = adding(4)
    first = wf.run("go", store=False)
    model = wf.steps[0].steps[0].model
    model.requests.clear()
    forked = first.fork(2, store=False)
    # The script starts again for the new run, so the live part runs it from its first reply.
    assert [t.replayed for t in forked.turns] == [True, True, False, False, False, False]
    assert len(model.requests) == len(forked.turns) - 2
    assert len(model.requests[0].messages) == 1 + 2 * 2


def test_fork_needs_a_workflow_and_a_turn_in_range(store: RunStore) -> None:
    first = adding(3).run("go", store=store)
    loaded = store.load(first.run_id)
    with pytest.raises(ValueError, match=r"loaded from a store\); pass `workflow=`"):
        loaded.fork(1)
    for at in (-1, 4, True):
        with pytest.raises(ValueError, match="`at` must be a turn index from 0 to 3"):
            loaded.fork(at, workflow=adding(3))


def test_fork_goes_live_where_the_changed_workflow_takes_another_path(store: RunStore) -> None:
    first = adding(4).run("go", store=store)
    other = adding(4, name="Other", model=ScriptedModel(["fresh"]))
    forked = store.load(first.run_id).fork(3, workflow=other, store=False)
    assert forked.replay_diverged_at == 0 and not any(t.replayed for t in forked.turns)


# -- resume ----------------------------------------------------------------------------------


def test_resume_after_an_exception_runs_no_finished_turn_twice(store: RunStore) -> None:
    calls: list[int] = []
    ran: list[int] = []

    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        ran.append(a)
        return a + b

    def respond(request: Any) -> Any:
        calls.append(len(calls) + 1)
        if len(calls) == 4:
            raise RuntimeError("connection lost")
        done = sum(1 for m in request.messages if m.role == "tool")
        return reply.tool("add", a=done, b=1) if done < 4 else "done"

    wf = Workflow(
        "w",
        [loop(steps=[Agent("A", model=FunctionModel(respond), tools=[add])], until=until_answered)],
    )
    with pytest.raises(RuntimeError):
        wf.run("count", run_id="r1", store=store)
    assert calls == [1, 2, 3, 4] and ran == [0, 1, 2]
    crashed = store.load("r1")
    assert crashed.status == "failed" and len(crashed.turns) == 3

    resumed = wf.resume("r1", store=store)
    assert resumed.status == "finished" and resumed.run_id == "r1"
    assert calls == [1, 2, 3, 4, 5, 6]  # turns 3 and 4 only
    assert ran == [0, 1, 2, 3]  # every tool call ran once
    assert [t.replayed for t in resumed.turns] == [True, True, True, False, False]

    stored = store.load("r1")
    assert stored.status == "finished" and stored.error is None
    assert len(stored.turns) == 5 and stored.history == resumed.history
    assert [t.model_dump() for t in stored.turns[:3]] == [t.model_dump() for t in crashed.turns]
    assert [r["run_id"] for r in store.list_runs()] == ["r1"]


def test_resume_with_a_changed_step_replaces_the_stored_turns_from_there(
    store: RunStore,
) -> None:
    """Where the resumed workflow asks something else, the stored turns from there are
    replaced; those before are kept as they first happened."""
    a = Agent("A", model=ScriptedModel(["a"]))
    b = Agent("B", model=ScriptedModel(["b"]))
    c_calls: list[int] = []

    def c_model(request: Any) -> Any:
        c_calls.append(1)
        if len(c_calls) == 1:
            raise RuntimeError("down")
        return "c"

    c = Agent("C", model=FunctionModel(c_model))
    with pytest.raises(RuntimeError):
        Workflow("w", [a, b, c]).run("go", run_id="r", store=store)
    first = store.load("r")
    assert [t.agent for t in first.turns] == ["A", "B"]

    b2 = b.replace(system="Say more.", model=ScriptedModel(["b, at length"]))
    resumed = Workflow("w", [a, b2, c]).resume("r", store=store)
    assert resumed.replay_diverged_at == 1
    assert [t.replayed for t in resumed.turns] == [True, False, False]
    stored = store.load("r")
    assert stored.status == "finished" and stored.history == resumed.history
    assert [t.info.response for t in stored.turns] == ["a", "b, at length", "c"]
    assert stored.turns[0].model_dump() == first.turns[0].model_dump()
    assert stored.turns[1].request_key == resumed.turns[1].request_key


def test_resume_checks_the_workflow_and_the_run(store: RunStore) -> None:
    adding(2).run("go", run_id="r", store=store)
    with pytest.raises(ValueError, match="made by workflow 'adding', not 'other'"):
        Workflow("other", [Agent("A", model=ScriptedModel(["x"]))]).resume("r", store=store)
    with pytest.raises(StoreError, match="no run 'missing'"):
        adding(2).resume("missing", store=store)


def test_resume_of_a_finished_run_calls_nothing(store: RunStore) -> None:
    wf = adding(3)
    wf.run("go", run_id="r", store=store)
    model = wf.steps[0].steps[0].model
    model.requests.clear()
    again = wf.resume("r", store=store)
    assert model.requests == [] and again.status == "finished" and len(again.turns) == 3


def test_no_store_at_all_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("THENA_NB_STORE", "off")
    with pytest.raises(StoreError, match="there is no run store"):
        Run.load("abc")
    with pytest.raises(StoreError, match="there is no run store"):
        runs()


# -- what-if ---------------------------------------------------------------------------------


def test_what_if_answers_from_the_recorded_turns(store: RunStore) -> None:
    wf = adding(6)
    run = wf.run("go", store=store)
    model = wf.steps[0].steps[0].model
    model.requests.clear()
    assert what_if(run, max_tool_calls(2)) == {
        "adding/0.loop": WhatIf(iteration=2, stop_reason="until")
    }
    assert what_if(run, until_text("never")) == {"adding/0.loop": WhatIf()}
    loaded = store.load(run.run_id)
    assert what_if(loaded, lambda ctx: ctx.iteration == 4)["adding/0.loop"].iteration == 4
    assert model.requests == []


def test_what_if_sees_state_snapshots_and_the_context() -> None:
    class Tally(BaseModel):
        total: int = 0

    @tool
    def bump(ctx: Context, by: int) -> int:
        """Add to the tally."""
        ctx.state.total += by
        return ctx.state.total

    replies = [reply.tool("bump", by=n) for n in (1, 2, 3, 4)] + ["done"]
    agent = Agent("A", model=ScriptedModel(replies), tools=[bump])
    wf = Workflow("w", [loop(steps=[agent], until=until_answered)], state=Tally)
    store = MemoryRunStore()
    run = wf.run("go", store=store)
    seen: list[Any] = []

    def over_five(ctx: Any, state: Any) -> bool:
        seen.append(state)
        return (state.total if isinstance(state, Tally) else state["total"]) > 5

    assert what_if(run, over_five)["w/0.loop"] == WhatIf(iteration=3, stop_reason="until")
    assert seen == [Tally(total=1), Tally(total=3), Tally(total=6)]
    seen.clear()
    assert what_if(store.load(run.run_id), over_five)["w/0.loop"].iteration == 3
    assert seen == [{"total": 1}, {"total": 3}, {"total": 6}]

    ctx = what_if_context(run, run.loops[0], 2)
    assert isinstance(ctx, RecordedContext)
    assert (ctx.iteration, len(ctx.turns), len(ctx.loop_turns), ctx.loop_tool_calls) == (2, 2, 2, 2)
    assert ctx.turn is not None and ctx.turn.tool_name == "bump"
    assert ctx.state == Tally(total=3) and ctx.output == ""
    assert list(ctx.history) == run.history[:5]
    assert ctx.usage.tool_calls == 2 and ctx.run_id == run.run_id


def test_what_if_skips_iterations_the_executor_never_checked() -> None:
    """A loop stopped by `fails` never checked `until` after its last iteration."""

    @tool
    def fail() -> str:
        """Always raises."""
        raise ValueError("no")

    agent = Agent("A", model=ScriptedModel([reply.tool("fail")] * 3), tools=[fail])
    run = Workflow("w", [loop(steps=[agent], until=until_answered, max_fails=3)]).run(
        "go", store=False
    )
    assert run.loops[0].stop_reason == "fails" and run.loops[0].iterations == 3
    iterations: list[int] = []
    what_if(run, lambda ctx: iterations.append(ctx.iteration))
    assert iterations == [1, 2]


def _recorder(into: list[int]) -> Any:
    def record(ctx: Any) -> bool:
        into.append(ctx.iteration)
        return False

    return record


def test_what_if_checks_the_last_iteration_when_the_budget_stopped_before_the_next() -> None:
    """A budget spent at the start of an iteration leaves the one before it complete."""
    wf = adding(5)
    wf.budget = Budget(max_model_calls=2)
    store = MemoryRunStore()
    run = wf.run("go", store=store)
    assert run.loops[0].stop_reason == "budget" and run.loops[0].iterations == 2
    for recorded in (run, store.load(run.run_id)):
        iterations: list[int] = []
        what_if(recorded, _recorder(iterations))
        assert iterations == [1, 2]


def test_what_if_keys_every_run_of_a_nested_loop_and_sees_the_last_stop_reason() -> None:
    inner = Agent(
        "Inner",
        model=ScriptedModel([reply.tool("add", a=1, b=1), "ok"] * 2),
        tools=adding(2).steps[0].steps[0].tools,
    )
    outer = loop(
        steps=[loop(steps=[inner], until=until_answered)], until=lambda ctx: False, max_iterations=2
    )
    after = Agent("After", model=ScriptedModel(["a", "b", "c"]))
    wf = Workflow("n", [outer, loop(steps=[after], until=until_answered, max_iterations=1)])
    run = wf.run("go", store=False)
    answers = what_if(run, max_tool_calls(1))
    assert answers == {
        "n/0.loop": WhatIf(iteration=1, stop_reason="until"),
        "n/0.loop/0.loop": WhatIf(iteration=1, stop_reason="until"),
        "n/0.loop/0.loop#2": WhatIf(iteration=1, stop_reason="until"),
        "n/1.loop": WhatIf(),
    }
    exhausted = what_if(run, was_exhausted)
    assert exhausted["n/1.loop"] == WhatIf(iteration=1, stop_reason="until")
    # Never true for the outer loop, which ran out of iterations: it still would have.
    assert exhausted["n/0.loop"] == WhatIf(iteration=2, stop_reason="exhausted")


def test_what_if_that_never_holds_over_an_exhausted_loop_says_exhausted() -> None:
    agent = adding(3).steps[0].steps[0]
    run = Workflow("adding", [loop(steps=[agent], until=until_answered, max_iterations=2)]).run(
        "go", store=False
    )
    assert run.stop_reasons == {"adding/0.loop": "exhausted"}
    answer = what_if(run, until_text("never"))["adding/0.loop"]
    assert answer == WhatIf(iteration=2, stop_reason="exhausted")


# -- changes ---------------------------------------------------------------------------------


def test_apply_changes_by_agent_name_and_step_path() -> None:
    def until_two(ctx: Any) -> bool:
        return ctx.iteration >= 2

    a = Agent("A", model=ScriptedModel(["a"]))
    worker = Agent("Worker", model=ScriptedModel(["w"]), system="Be thorough.")
    wf = Workflow(
        "review",
        [
            parallel([a, Agent("B", model=ScriptedModel(["b"]))]),
            loop(steps=[worker], until=until_answered),
        ],
        budget=Budget(max_model_calls=50),
    )
    changed = apply_changes(
        wf,
        {
            "Worker": {"system": "Be brief."},
            "review/0.parallel/1.B": {"max_tokens": 10},
            "review/1.loop": {"max_iterations": 5, "until": until_two},
            "review": {"budget": Budget(max_model_calls=3)},
        },
    )
    assert changed is not wf and wf.steps[1].steps[0].system == "Be thorough."
    new_loop = changed.steps[1]
    assert (new_loop.max_iterations, new_loop.until) == (5, until_two)
    assert new_loop.steps[0].system == "Be brief." and new_loop.steps[0].name == "Worker"
    assert changed.steps[0].steps[0] is a and changed.steps[0].steps[1].max_tokens == 10
    assert changed.budget == Budget(max_model_calls=3)
    assert apply_changes(wf, None) is wf and apply_changes(wf, {}) is wf


def test_apply_changes_names_what_it_cannot_change() -> None:
    wf = adding(2)
    with pytest.raises(ValueError) as info:
        apply_changes(wf, {"Executor": {"system": "x"}})
    message = str(info.value)
    assert "no agent or step 'Executor'" in message
    assert "Agents: 'Calc'" in message and "'adding/0.loop', 'adding/0.loop/0.Calc'" in message
    with pytest.raises(ValueError, match="loop 'adding/0.loop' has no changeable field 'system'"):
        apply_changes(wf, {"adding/0.loop": {"system": "x"}})
    with pytest.raises(ValueError, match="agent 'Calc' has no field 'colour'"):
        apply_changes(wf, {"Calc": {"colour": "red"}})
    with pytest.raises(ValueError, match="`max_iterations` must be a whole number"):
        apply_changes(wf, {"adding/0.loop": {"max_iterations": 0}})
    with pytest.raises(TypeError, match=r"changes\['Calc'\] must be a dict"):
        apply_changes(wf, {"Calc": "Be brief."})  # type: ignore[dict-item]


# -- the runs frame --------------------------------------------------------------------------


def test_runs_frame(store: RunStore) -> None:
    wf = adding(3)
    ids = [wf.run(f"go {i}", store=store).run_id for i in range(2)]
    frame = runs(store=store)
    assert tuple(frame.columns) == RUNS_COLUMNS
    assert list(frame["run_id"]) == ids and list(frame["turns"]) == [3, 3]
    assert list(frame["status"]) == ["finished", "finished"]
    assert frame["stop_reasons"][0] == {"adding/0.loop": "until"}
    assert str(frame["turns"].dtype) == "int64"
    assert str(frame["started_at"].dt.tz) == "UTC"
    empty = runs(store=MemoryRunStore())
    assert tuple(empty.columns) == RUNS_COLUMNS and len(empty) == 0


def test_runs_frame_names_the_run_each_fork_and_continuation_came_from(
    store: RunStore, tmp_path: Path
) -> None:
    """`parent_run_id` and `forked_at` are the run a fork or continuation came from and the
    turn it went live from; for a run that is neither, both are missing (`<NA>`)."""
    first = adding(3).run("go", store=store)
    edited = first.fork(1, reply="Enough.", store=store)
    more = first.continue_with("Again.", workflow=adding(1), store=store)
    frame = runs(store=store).set_index("run_id")
    assert frame.loc[first.run_id, "parent_run_id"] is pd.NA
    assert frame.loc[first.run_id, "forked_at"] is pd.NA
    assert frame.loc[edited.run_id, ["parent_run_id", "forked_at"]].tolist() == [first.run_id, 1]
    assert frame.loc[more.run_id, ["parent_run_id", "forked_at"]].tolist() == [first.run_id, 3]
    assert (str(frame["parent_run_id"].dtype), str(frame["forked_at"].dtype)) == ("string", "Int64")
    if isinstance(store, SqliteRunStore):  # read back from the file by another connection
        with SqliteRunStore.from_path(tmp_path / "runs.sqlite3") as again:
            assert runs(store=again).equals(runs(store=store))


def test_runs_frame_of_a_store_that_lists_no_parents_leaves_them_missing() -> None:
    """A store of your own whose `list_runs` rows lack the two keys still gives the frame."""

    class Older(MemoryRunStore):
        def list_runs(self) -> list[dict[str, Any]]:
            rows = super().list_runs()
            for row in rows:
                del row["parent_run_id"], row["forked_at"]
            return rows

    store = Older()
    adding(2).run("go", store=store)
    frame = runs(store=store)
    assert tuple(frame.columns) == RUNS_COLUMNS
    assert frame["parent_run_id"].isna().all() and frame["forked_at"].isna().all()


def test_a_fork_records_its_parent_and_is_diffed_against_it(store: RunStore) -> None:
    """`parent_run_id` and `forked_at` are kept with the fork; `fork.parent` is the run it
    came from, and the diff against it parts where the fork went live."""
    first = adding(4).run("go", store=store)
    live = ScriptedModel(["brief answer"])
    forked = first.fork(2, changes={"Calc": {"model": live}}, store=store)
    assert (forked.parent_run_id, forked.forked_at) == (first.run_id, 2)
    assert forked.parent is first
    loaded = store.load(forked.run_id)
    assert (loaded.parent_run_id, loaded.forked_at) == (first.run_id, 2)
    assert Run.from_json(forked.to_json()).parent_run_id == first.run_id
    parted = forked.diff(forked.parent)
    assert parted.first_divergence is not None
    assert parted.first_divergence.turn_a == parted.first_divergence.turn_b == 2
    assert first.parent is None and first.parent_run_id is None


def test_a_loaded_fork_finds_its_parent_in_the_default_store() -> None:
    first = adding(3).run("go")
    forked = first.fork(1)
    again = Run.load(forked.run_id)
    assert again.parent is not None and again.parent.run_id == first.run_id


def test_an_older_store_file_gains_the_lineage_columns(tmp_path: Path) -> None:
    """A file written before forks recorded their parent is opened, extended and read."""
    import sqlite3

    path = tmp_path / "old.sqlite3"
    with SqliteRunStore.from_path(path) as store:
        run = adding(2).run("go", store=store)
    conn = sqlite3.connect(path)
    conn.execute("ALTER TABLE thena_runs DROP COLUMN parent_run_id")
    conn.execute("ALTER TABLE thena_runs DROP COLUMN forked_at")
    conn.commit()
    conn.close()
    with SqliteRunStore.from_path(path) as store:
        assert store.load(run.run_id).parent_run_id is None
        forked = store.load(run.run_id).fork(1, workflow=adding(2), store=store)
        assert store.load(forked.run_id).parent_run_id == run.run_id
