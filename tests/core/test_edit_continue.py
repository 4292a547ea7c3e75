"""Editing a run and going on from it: `run.fork(k, reply=/tool_results=/inject=)` and
`run.continue_with(...)`; their records, their store rows, and replays of them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

import thena_nb
from thena_nb import Agent, Message, Run, Workflow, loop, parallel, tool, until_answered
from thena_nb.core.records.model import ModelRequest
from thena_nb.core.records.types import finished
from thena_nb.models import FunctionModel, ScriptedModel, reply
from thena_nb.store import SqliteRunStore

STRIP = {"started_at", "duration_s", "replayed", "attempts", "cost_usd", "saved_usd"}


class Counting:
    """A workflow whose model adds until it has three tool results, then answers; every
    model request and every tool call is counted."""

    def __init__(self) -> None:
        self.ran: list[tuple[int, int]] = []

        @tool
        def add(a: int, b: int) -> int:
            """Add two numbers (up to 100)."""
            self.ran.append((a, b))
            if a > 100:
                raise ValueError("too big")
            return a + b

        self.model = FunctionModel(self.respond, name="counting")
        self.agent = Agent("Calc", model=self.model, tools=[add])
        self.wf = Workflow("sums", [loop(steps=[self.agent], until=until_answered)])

    @staticmethod
    def respond(request: ModelRequest) -> Any:
        results = [m.content for m in request.messages if m.role == "tool"]
        said = [m.content for m in request.messages if m.role == "user"]
        if len(results) < 3:
            return reply.tool("add", a=len(results), b=1)
        return f"sum {sum(int(r) for r in results if r.isdigit())}; heard {len(said)}"

    @property
    def calls(self) -> tuple[int, int]:
        """Model requests and tool calls made so far."""
        return len(self.model.requests), len(self.ran)

    def reset(self) -> None:
        self.model.requests.clear()
        self.ran.clear()


@pytest.fixture
def sums() -> Counting:
    return Counting()


@pytest.fixture
def sqlite(tmp_path: Path) -> Iterator[SqliteRunStore]:
    with SqliteRunStore.from_path(tmp_path / "runs.sqlite3") as store:
        yield store


def same_turns(a: Run, b: Run) -> bool:
    return [t.model_dump(exclude=STRIP) for t in a.turns] == [
        t.model_dump(exclude=STRIP) for t in b.turns
    ]


# -- reply= ----------------------------------------------------------------------------------


def test_a_new_text_reply_replaces_turn_k_without_a_model_call(sums: Counting) -> None:
    first = sums.wf.run("go", store=False)
    assert [t.info.called_tool for t in first.turns] == [True, True, True, False]
    sums.reset()
    forked = first.fork(1, reply="I give up.", store=False)
    assert sums.calls == (0, 0)  # turn 0 replayed, turn 1's reply given: the loop ends
    assert [t.info.response for t in forked.turns] == ["", "I give up."]
    edited = forked.turns[1]
    assert (edited.replayed, edited.attempts, edited.tool_calls) == (False, 0, [])
    assert forked.turns[0].replayed
    assert forked.output == "I give up."
    assert forked.history[-1] == Message(role="assistant", content="I give up.", agent="Calc")
    assert (forked.parent_run_id, forked.forked_at, forked.parent) == (first.run_id, 1, first)


def test_a_new_tool_reply_runs_its_tools_live_and_goes_on_live(sums: Counting) -> None:
    first = sums.wf.run("go", store=False)
    sums.reset()
    forked = first.fork(1, reply=reply.tool("add", a=40, b=2), store=False)
    # Turn 1's tool ran on the new arguments; turns 2 and 3 asked the model.
    assert sums.ran == [(40, 2), (2, 1)]
    assert len(sums.model.requests) == 2
    edited = forked.turns[1]
    assert (edited.replayed, edited.attempts) == (False, 0)
    call = edited.tool_calls[0]
    assert (call.id, call.arguments, call.ok, call.result) == (
        "edit_1_0",
        {"a": 40, "b": 2},
        True,
        "42",
    )
    assert sums.model.requests[0].messages[-1].content == "42"
    assert [t.replayed for t in forked.turns] == [True, False, False, False]
    assert forked.output == "sum 46; heard 1"


def test_a_reply_with_several_calls_keeps_their_order_and_ids(sums: Counting) -> None:
    first = sums.wf.run("go", store=False)
    new = reply.calls([("add", {"a": 1, "b": 1}), ("add", {"a": 2, "b": 2})], text="two sums")
    forked = first.fork(0, reply=new, store=False)
    edited = forked.turns[0]
    assert [(c.id, c.result) for c in edited.tool_calls] == [("edit_0_0", "2"), ("edit_0_1", "4")]
    assert edited.info.response == "two sums"
    assert edited.finish_reason == "tool_use"


def test_a_reply_given_as_a_reply_object_keeps_its_ids_and_tokens(sums: Counting) -> None:
    first = sums.wf.run("go", store=False)
    given = reply.text("Done early.", input_tokens=7, output_tokens=3)
    forked = first.fork(2, reply=given, store=False)
    assert (forked.turns[2].input_tokens, forked.turns[2].output_tokens) == (7, 3)
    assert forked.usage.input_tokens == sum(t.input_tokens for t in forked.turns)


def test_an_edited_turn_writes_the_state_from_its_new_reply() -> None:
    class Answer(BaseModel):
        text: str = ""

    first_agent = Agent("A", model=ScriptedModel(["one"]), output_field="text")
    second_agent = Agent("B", model=ScriptedModel(["two"]), output_field="text")
    wf = Workflow("w", [first_agent, second_agent], state=Answer)
    first = wf.run("go", store=False)
    forked = first.fork(1, reply="edited", store=False)
    assert (first.state.text, forked.state.text) == ("two", "edited")
    assert forked.states == {0: {"text": "one"}, 1: {"text": "edited"}}


# -- tool_results= ---------------------------------------------------------------------------


def test_replaced_results_are_recorded_as_responses_and_the_run_goes_on_from_k_plus_1(
    sums: Counting,
) -> None:
    first = sums.wf.run("go", store=False)
    call_id = first.turns[1].tool_calls[0].id
    sums.reset()
    forked = first.fork(1, tool_results={call_id: "100"}, store=False)
    assert sums.ran == [(2, 1)]  # turn 1's tool did not run; turn 2's did, live
    assert len(sums.model.requests) == 2  # turns 2 and 3 asked the model
    edited = forked.turns[1]
    assert (edited.replayed, edited.attempts) == (True, 0)
    call = edited.tool_calls[0]
    assert (call.ok, call.result, call.decision, call.error) == (True, "100", "respond", None)
    assert edited.info.response == first.turns[1].info.response
    assert edited.request_key == first.turns[1].request_key
    assert [m.content for m in sums.model.requests[0].messages if m.role == "tool"] == ["1", "100"]
    assert [t.replayed for t in forked.turns] == [True, True, False, False]
    assert forked.output == "sum 104; heard 1"


def test_only_the_named_calls_of_turn_k_are_replaced() -> None:
    agent = Agent(
        "A",
        model=ScriptedModel(
            [reply.calls([("add", {"a": 1, "b": 2}), ("add", {"a": 3, "b": 4})]), "ok"]
        ),
        tools=[tool(lambda a, b: a + b, name="add")],
    )
    first = Workflow("w", [loop(steps=[agent], until=until_answered)]).run("go", store=False)
    forked = first.fork(0, tool_results={"call_1_1": "seven"}, store=False)
    calls = forked.turns[0].tool_calls
    assert [(c.result, c.decision) for c in calls] == [("3", None), ("seven", "respond")]


# -- inject= ---------------------------------------------------------------------------------


def test_injected_messages_come_before_turn_k_and_its_model_sees_them(sums: Counting) -> None:
    first = sums.wf.run("go", store=False)
    sums.reset()
    note = Message(role="user", content="Use small numbers.")
    forked = first.fork(2, inject=[note, "And be quick."], store=False)
    assert [t.replayed for t in forked.turns] == [True, True, False, False]
    seen = sums.model.requests[0].messages
    assert [m.content for m in seen[-2:]] == ["Use small numbers.", "And be quick."]
    at = forked.history.index(note)
    assert forked.history[at - 1].role == "tool"  # after turn 1's result
    assert forked.history[at + 2].role == "assistant"  # before turn 2's reply
    assert forked.output == "sum 6; heard 3"
    assert forked.turns[2].request_key != first.turns[2].request_key


def test_inject_with_a_new_reply_puts_both_into_turn_k(sums: Counting) -> None:
    first = sums.wf.run("go", store=False)
    sums.reset()
    forked = first.fork(1, inject=["Stop now."], reply="Stopping.", store=False)
    assert sums.calls == (0, 0)
    assert [m.content for m in forked.history[-2:]] == ["Stop now.", "Stopping."]


def test_a_fork_of_a_fork_keeps_the_messages_injected_before_it(sums: Counting) -> None:
    first = sums.wf.run("go", store=False)
    injected = first.fork(1, inject=["Hello again."], store=False)
    sums.reset()
    again = injected.fork(2, reply="Short answer.", store=False)
    assert sums.calls == (0, 0)
    assert [m.content for m in again.history if m.role == "user"] == ["go", "Hello again."]
    assert again.turns[1].request_key == injected.turns[1].request_key


# -- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("at", "edits", "error", "match"),
    [
        (4, {"reply": "x"}, ValueError, r"the index of the turn to edit from 0 to 3, got 4"),
        (-1, {"tool_results": {"call_1_0": "x"}}, ValueError, r"from 0 to 3, got -1"),
        (5, {"inject": ["x"]}, ValueError, r"a turn index from 0 to 4, got 5"),
        (
            1,
            {"tool_results": {"nope": "x"}},
            ValueError,
            r"turn 1 has no tool call 'nope'; its call ids: 'call_2_0'",
        ),
        (3, {"tool_results": {"x": "y"}}, ValueError, r"its call ids: none: it made no tool call"),
        (1, {"tool_results": {"call_2_0": 5}}, TypeError, r"must be the result's text"),
        (1, {"tool_results": {}}, TypeError, r"non-empty dict of call id"),
        (1, {"reply": "x", "tool_results": {"call_2_0": "y"}}, ValueError, r"cannot go together"),
        (
            1,
            {"inject": ["x"], "tool_results": {"call_2_0": "y"}},
            ValueError,
            r"cannot go together",
        ),
        (1, {"reply": 42}, TypeError, r"`reply=` takes the model's new answer"),
        (1, {"reply": reply.error(RuntimeError("x"))}, TypeError, r"got ErrorReply"),
        (1, {"inject": "just text"}, TypeError, r"takes a list of messages"),
        (
            1,
            {"inject": [Message(role="assistant", content="x")]},
            TypeError,
            r"takes user messages",
        ),
    ],
)
def test_bad_edits_raise_before_anything_runs(
    sums: Counting, sqlite: SqliteRunStore, at: int, edits: dict[str, Any], error: type, match: str
) -> None:
    first = sums.wf.run("go", store=sqlite)
    sums.reset()
    with pytest.raises(error, match=match):
        first.fork(at, store=sqlite, **edits)
    assert sums.calls == (0, 0)
    assert [r["run_id"] for r in sqlite.list_runs()] == [first.run_id]


def test_an_edit_where_the_changed_workflow_takes_another_path_fails_before_a_call(
    sums: Counting,
) -> None:
    first = sums.wf.run("go", store=False)
    model = ScriptedModel(["never"])
    renamed = sums.agent.replace(name="Other", model=model)
    other = Workflow("sums", [loop(steps=[renamed], until=until_answered)])
    with pytest.raises(ValueError, match=r"runs 'sums/0.loop/0.Other' at turn 0.*turn 2 does"):
        first.fork(2, reply="x", workflow=other, store=False)
    assert model.requests == []


def test_a_turn_inside_a_parallel_block_cannot_be_edited() -> None:
    a = Agent("A", model=ScriptedModel(["a"]))
    b = Agent("B", model=ScriptedModel(["b"]))
    first = Workflow("w", [parallel([a, b])]).run("go", store=False)
    with pytest.raises(ValueError, match=r"turn 1 ran inside a parallel block \(branch 1"):
        first.fork(1, reply="c", store=False)


# -- continue_with ---------------------------------------------------------------------------


def test_a_continuation_keeps_the_old_turns_and_runs_the_steps_again(sums: Counting) -> None:
    first = sums.wf.run("go", store=False)
    sums.reset()
    second = first.continue_with("Once more.", store=False)
    assert sums.calls == (1, 0)  # the loop ran again from the top; nothing old ran again
    assert second.input == "Once more."
    assert second.history[: len(first.history)] == first.history
    assert second.history[len(first.history)] == Message(role="user", content="Once more.")
    assert [t.index for t in second.turns] == list(range(5))
    assert [t.replayed for t in second.turns] == [True] * 4 + [False]
    assert [t.model_dump(exclude={"replayed"}) for t in second.turns[:4]] == [
        t.model_dump(exclude={"replayed"}) for t in first.turns
    ]
    assert sums.model.requests[0].messages[len(first.history)].content == "Once more."
    assert second.output == "sum 6; heard 2"
    assert (second.parent_run_id, second.forked_at, second.parent) == (first.run_id, 4, first)
    assert second.usage.model_calls == 5
    assert len(second.report.children) == 2  # the parent's loop, then the new one


def test_a_continuation_starts_from_the_state_the_run_ended_with() -> None:
    class Notes(BaseModel):
        answers: list[str] = []

    def keep(ctx: Any) -> None:
        ctx.state.answers.append(ctx.output)

    echo = FunctionModel(lambda r: f"echo {r.messages[-1].content}")
    wf = Workflow("chat", [Agent("A", model=echo), keep], state=Notes)
    first = wf.run("one", store=False)
    second = first.continue_with("two", store=False)
    third = second.continue_with("three", store=False)
    assert third.state.answers == ["echo one", "echo two", "echo three"]
    assert first.state.answers == ["echo one"]  # the parent's state is not touched
    assert [t.index for t in third.turns] == [0, 1, 2]
    assert (third.forked_at, third.parent_run_id) == (2, second.run_id)


def test_continue_with_needs_text() -> None:
    wf = Workflow("chat", [Agent("A", model=ScriptedModel(["hi"]))])
    first = wf.run("hello", store=False)
    with pytest.raises(TypeError, match=r"the user's next message \(a str\)"):
        first.continue_with("", store=False)


def test_a_loaded_run_continues_with_a_workflow_and_says_so_without(
    sums: Counting, sqlite: SqliteRunStore
) -> None:
    first = sums.wf.run("go", store=sqlite)
    loaded = Run.load(first.run_id, store=sqlite)
    with pytest.raises(ValueError, match=r"loaded from a store\); pass `workflow=` to continue it"):
        loaded.continue_with("more")
    second = loaded.continue_with("more", workflow=sums.wf, store=sqlite)
    assert second.history[: len(first.history)] == first.history
    assert second.parent_run_id == first.run_id


class Rounds:
    """A chat whose model adds twice after each user message, then answers; model requests
    and tool calls are counted."""

    def __init__(self) -> None:
        self.ran: list[int] = []

        @tool
        def add(a: int, b: int) -> int:
            """Add two numbers."""
            self.ran.append(a)
            return a + b

        self.model = FunctionModel(self.respond, name="rounds")
        agent = Agent("Calc", model=self.model, tools=[add])
        self.wf = Workflow("rounds", [loop(steps=[agent], until=until_answered)])

    @staticmethod
    def respond(request: ModelRequest) -> Any:
        last_user = max(i for i, m in enumerate(request.messages) if m.role == "user")
        results = [m for m in request.messages[last_user:] if m.role == "tool"]
        if len(results) < 2:
            return reply.tool("add", a=len(results), b=1)
        return f"{request.messages[last_user].content} done"

    @property
    def calls(self) -> tuple[int, int]:
        return len(self.model.requests), len(self.ran)


def test_a_continuation_replays_an_earlier_one_with_no_call(sqlite: SqliteRunStore) -> None:
    """`continue_with(text, replay=earlier)` of a stored run reuses the earlier
    continuation's new turns, tool results included, as `wf.run(replay=)` does."""
    chat = Rounds()
    first = chat.wf.run("go", store=sqlite)
    earlier = first.continue_with("Again.", store=sqlite)
    assert chat.calls == (6, 4) and len(earlier.turns) == 6
    parent = Run.load(first.run_id, store=sqlite)
    recorded = Run.load(earlier.run_id, store=sqlite)
    again = parent.continue_with("Again.", workflow=chat.wf, replay=recorded, store=sqlite)
    assert chat.calls == (6, 4)  # no model call, no tool call
    assert again.replay_diverged_at is None
    assert [(t.replayed, t.attempts) for t in again.turns[3:]] == [(True, 0)] * 3
    assert again.history == earlier.history and same_turns(again, earlier)
    assert again.output == "Again. done" and again.status == "finished"
    assert (again.parent_run_id, again.forked_at) == (first.run_id, 3)
    assert Run.load(again.run_id, store=sqlite).history == earlier.history


def test_a_continuation_of_a_continuation_replays_too() -> None:
    """The replayed run's own earlier follow-ups are in the parent's history already."""
    chat = Rounds()
    second = chat.wf.run("go", store=False).continue_with("Again.", store=False)
    third = second.continue_with("Once more.", store=False)
    before = chat.calls
    again = second.continue_with("Once more.", replay=third, store=False)
    assert chat.calls == before and again.replay_diverged_at is None
    assert again.history == third.history
    assert [m.content for m in again.history if m.role == "user"] == ["go", "Again.", "Once more."]


def test_a_continuation_with_other_text_goes_live_where_it_differs() -> None:
    chat = Rounds()
    first = chat.wf.run("go", store=False)
    earlier = first.continue_with("Again.", store=False)
    before = chat.calls
    other = first.continue_with("Something else.", replay=earlier, store=False)
    assert chat.calls == (before[0] + 3, before[1] + 2)
    assert other.replay_diverged_at == 3
    assert [t.replayed for t in other.turns[3:]] == [False] * 3
    assert other.output == "Something else. done"


# -- stored, listed, replayed ----------------------------------------------------------------


def test_forks_and_continuations_are_stored_and_listed(
    sums: Counting, sqlite: SqliteRunStore
) -> None:
    first = sums.wf.run("go", store=sqlite)
    call_id = first.turns[0].tool_calls[0].id
    made = [
        first.fork(1, reply="Enough.", store=sqlite),
        first.fork(0, tool_results={call_id: "9"}, store=sqlite),
        first.fork(2, inject=["Hurry."], store=sqlite),
        first.continue_with("Again.", store=sqlite),
    ]
    frame = thena_nb.runs(store=sqlite)
    assert frame["run_id"].tolist() == [first.run_id] + [r.run_id for r in made]
    assert frame["turns"].tolist() == [4, 2, 4, 4, 5]
    assert frame["input"].tolist()[-1] == "Again."
    for run in made:
        loaded = Run.load(run.run_id, store=sqlite)
        assert (loaded.parent_run_id, loaded.forked_at) == (first.run_id, run.forked_at)
        assert loaded.history == run.history
        assert same_turns(loaded, run)
        assert [t.replayed for t in loaded.turns] == [t.replayed for t in run.turns]
        back = Run.from_json(run.to_json())
        assert (back.input, back.history, back.forked_at) == (run.input, run.history, run.forked_at)
        assert same_turns(back, run)


def test_a_run_with_edits_rejections_and_responses_replays_with_no_call(
    sums: Counting, sqlite: SqliteRunStore
) -> None:
    first = sums.wf.run("go", store=False)
    edited = first.fork(1, reply=reply.tool("add", a=500, b=5), inject=["Bigger."], store=False)
    said = edited.fork(2, tool_results={edited.turns[2].tool_calls[0].id: "oops"}, store=False)
    # Turn 1's failed call marked rejected, as a tool gate records a rejection.
    turn = said.turns[1]
    assert turn.tool_calls[0].ok is False
    rejected = finished(turn.tool_calls[0], decision="reject")
    said.turns[1] = turn.model_copy(update={"tool_calls": [rejected]})
    assert [m.content for m in said.history if m.role == "user"] == ["go", "Bigger."]
    stored = Run.load(sqlite_copy(said, sqlite), store=sqlite)
    for recorded in (said, stored):
        sums.reset()
        again = sums.wf.run("go", replay=recorded, store=False)
        assert sums.calls == (0, 0)
        assert again.replay_diverged_at is None
        assert all(t.replayed and t.attempts == 0 for t in again.turns)
        assert same_turns(again, said)
        assert again.history == said.history
        decisions = [c.decision for t in again.turns for c in t.tool_calls]
        assert decisions == [None, "reject", "respond"]
        assert again.output == said.output == "sum 1; heard 2"


def sqlite_copy(run: Run, store: SqliteRunStore) -> str:
    """Store a finished run made elsewhere, as an import would."""
    from thena_nb.core.engine._aio import run_sync
    from thena_nb.store import records_of

    async def write() -> None:
        await store.run_started(run)
        for record in records_of(run):
            await store.turn_recorded(run, record)
        await store.run_finished(run)

    run_sync(write())
    return run.run_id
