"""A tool call's id is unique within a run's history (issue 40, section 8).

Two offline models in one workflow, an offline model that counts its calls from 1 again in a
fork, a server that gives no ids: however the ids came, no two calls of a run share one, and
each result answers its own call under the id the model is then sent.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import pytest
from chat_completions_server import ChatCompletionsServer, Completion

from thena_nb import Agent, Message, ToolCall, Workflow, loop, parallel, tool, until_answered
from thena_nb.core.engine._run_state import CallIds
from thena_nb.core.runs.run import Run
from thena_nb.models import FunctionModel, ModelRequest, OpenAICompatModel, Reply, ScriptedModel
from thena_nb.models import reply as r


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def call_ids(run: Run) -> list[str]:
    return [c.id for t in run.turns for c in t.tool_calls]


def assert_unique_and_answered(history: Sequence[Message]) -> None:
    """Every call id appears once in `history`, and each tool result answers one of them."""
    made = [c.id for m in history for c in m.tool_calls]
    repeated = [i for i, n in Counter(made).items() if n > 1]
    assert not repeated, f"repeated call ids: {repeated} in {made}"
    answered = [m.tool_call_id for m in history if m.role == "tool"]
    assert sorted(answered) == sorted(made)


def test_two_offline_models_in_one_loop_never_share_an_id() -> None:
    """Two scripted agents take turns in one loop: each counts its own calls, yet the run's
    ids are all distinct (and the same in every run, so request keys line up)."""

    def workflow() -> Workflow:
        a = Agent("A", model=ScriptedModel([r.tool("add", a=1, b=2)] * 3 + ["a"]), tools=[add])
        fn = FunctionModel(
            lambda request: r.tool("add", a=2, b=2) if len(request.messages) < 12 else "b"
        )
        b = Agent("B", model=fn, tools=[add])
        return Workflow("pair", [loop(steps=[a, b], until=until_answered, max_iterations=4)])

    run = workflow().run("go", store=False)
    assert len(call_ids(run)) == 6
    assert len(set(call_ids(run))) == 6, call_ids(run)
    assert_unique_and_answered(run.history)
    again = workflow().run("go", store=False)
    assert call_ids(again) == call_ids(run)
    assert [t.request_key for t in again.turns] == [t.request_key for t in run.turns]


def test_parallel_branches_of_offline_models_get_distinct_ids_and_replay() -> None:
    """Both branches start from the same history, so both offline models make `call_1_0`:
    the run keeps one and gives the other a new id, in its result too, and the agent after
    the block is sent both under their ids. A replay of the run serves every turn."""
    seen: list[ModelRequest] = []

    def summary(request: ModelRequest) -> str:
        seen.append(request)
        return "summed up"

    def workflow() -> Workflow:
        a = Agent("A", model=ScriptedModel([r.tool("add", a=1, b=2), "a"]), tools=[add])
        b = Agent("B", model=ScriptedModel([r.tool("add", a=2, b=2), "b"]), tools=[add])
        branches = [loop(steps=[x], until=until_answered) for x in (a, b)]
        return Workflow("fan", [parallel(branches), Agent("C", model=FunctionModel(summary))])

    run = workflow().run("go", store=False)
    ids = call_ids(run)
    assert len(ids) == 2 and len(set(ids)) == 2, ids
    assert_unique_and_answered(run.history)
    assert_unique_and_answered(seen[-1].messages)  # what the model after the block was sent
    sent = {c.id for m in seen[-1].messages for c in m.tool_calls}
    assert sent == set(ids)

    again = workflow().run("go", store=False, replay=run)
    assert again.replay_diverged_at is None
    assert all(t.replayed for t in again.turns)
    assert call_ids(again) == ids


def test_a_model_that_repeats_its_ids_is_sent_the_new_ones() -> None:
    """A model that gives every call the same id: the second call gets `<id>_2`, its result
    answers `<id>_2`, and the model's next request carries that id."""
    asked: list[ModelRequest] = []

    def same_id(request: ModelRequest) -> Reply:
        asked.append(request)
        if len(asked) > 2:
            return r.text("done")
        call = ToolCall(id="fixed", name="add", arguments={"a": 1, "b": len(asked)})
        return Reply(tool_calls=[call])

    agent = Agent("A", model=FunctionModel(same_id), tools=[add])
    run = Workflow("w", [loop(steps=[agent], until=until_answered)]).run("go", store=False)
    assert call_ids(run) == ["fixed", "fixed_2"]
    assert_unique_and_answered(run.history)
    last = asked[-1].messages
    assert [c.id for m in last for c in m.tool_calls] == ["fixed", "fixed_2"]
    assert [m.tool_call_id for m in last if m.role == "tool"] == ["fixed", "fixed_2"]


def _fixed_id(name: str, call_id: str) -> Agent:
    """An agent whose model gives its one call the id `call_id`, then answers."""

    def answer(request: ModelRequest) -> Reply | str:
        if request.messages[-1].role == "tool":
            return f"{name} done"
        return Reply(tool_calls=[ToolCall(id=call_id, name="add", arguments={"a": 1, "b": 1})])

    return Agent(name, model=FunctionModel(answer), tools=[add])


def test_parallel_branches_that_repeat_an_id_get_distinct_ones_and_replay() -> None:
    """Both branches' models give `same`: the run keeps one, gives the other a new id (its
    result too), and a replay serves every turn with the ids as recorded."""

    def workflow() -> Workflow:
        branches = [loop(steps=[_fixed_id(n, "same")], until=until_answered) for n in "AB"]
        return Workflow("fan", [parallel(branches)])

    run = workflow().run("go", store=False)
    assert sorted(call_ids(run)) == ["same", "same_2"]
    assert_unique_and_answered(run.history)
    again = workflow().run("go", store=False, replay=run)
    assert again.replay_diverged_at is None
    assert all(t.replayed for t in again.turns)
    assert call_ids(again) == call_ids(run)


def test_a_run_stored_with_repeated_ids_still_replays_in_full(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Runs recorded before ids were made unique hold repeated ones, and their request keys
    were made with them: a replay serves their turns with the ids as recorded."""

    def workflow() -> Workflow:
        first, second = (_fixed_id(n, "same") for n in "AB")
        return Workflow("old", [loop(steps=[first], until=until_answered), second])

    with monkeypatch.context() as patched:  # the executor as it was: ids kept as made
        patched.setattr(CallIds, "unique", lambda self, calls, history, *, rename: calls)
        old = workflow().run("go", store=False)
    assert call_ids(old) == ["same", "same"]

    again = workflow().run("go", store=False, replay=old)
    assert again.replay_diverged_at is None
    assert all(t.replayed for t in again.turns)
    assert call_ids(again) == call_ids(old)
    assert [t.request_key for t in again.turns] == [t.request_key for t in old.turns]


def _windowed(script: list[Reply | str]) -> Workflow:
    """An agent whose history processor shows its model the task alone: the model never
    sees the ids already in the run's history."""
    agent = Agent(
        "Worker",
        model=ScriptedModel(script),
        tools=[add],
        history=lambda messages: list(messages[:1]),
    )
    return Workflow("windowed", [loop(steps=[agent], until=until_answered, max_iterations=6)])


def test_a_forks_live_turns_never_reuse_the_copied_turns_ids() -> None:
    """The fork copies turns 0-1 (`call_1_0`, `call_2_0`); its scripted model counts from 1
    again and sees no ids, so it makes `call_1_0` again: the run gives it a new one."""
    script: list[Reply | str] = [r.tool("add", a=1, b=i) for i in range(3)] + ["done"]
    run = _windowed(script).run("go", store=False)
    assert call_ids(run) == ["call_1_0", "call_2_0", "call_3_0"]

    forked = run.fork(2, store=False)
    copied, live = call_ids(forked)[:2], call_ids(forked)[2:]
    assert copied == ["call_1_0", "call_2_0"]
    assert live and not set(live) & set(copied), (copied, live)
    assert len(set(call_ids(forked))) == len(call_ids(forked))
    assert_unique_and_answered(forked.history)
    # The copied turns keep the parent's request keys: the fork still replays as it did.
    assert [t.request_key for t in forked.turns[:2]] == [t.request_key for t in run.turns[:2]]


def test_the_openai_adapter_gives_calls_without_ids_distinct_ones() -> None:
    """A server that leaves the ids out of two replies: the run's two calls still have
    distinct ids, and the second request answers the first call under its own id."""
    script = [
        Completion(tool_calls=((None, "add", {"a": 1, "b": 2}),)),
        Completion(tool_calls=((None, "add", {"a": 3, "b": 4}),)),
        Completion("7"),
    ]
    with ChatCompletionsServer(script) as server:
        model = OpenAICompatModel("qwen3:8b", base_url=server.base_url, timeout=5.0)
        agent = Agent("Calc", model=model, tools=[add])
        run = Workflow("calc", [loop(steps=[agent], until=until_answered)]).run("go", store=False)
        bodies = [request.body for request in server.requests]
    ids = call_ids(run)
    assert len(ids) == 2 and ids[0] != ids[1], ids
    assert_unique_and_answered(run.history)
    sent = bodies[2]["messages"]
    assert [c["id"] for m in sent for c in m.get("tool_calls", ())] == ids
    assert [m["tool_call_id"] for m in sent if m["role"] == "tool"] == ids
