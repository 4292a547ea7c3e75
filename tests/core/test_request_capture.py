"""What each turn's model was sent: `Turn.request`, `run.request_of`, `run.wire_request_of`.

Every check compares the rebuilt request with what the model itself received (offline
models log each `ModelRequest` they get), so "exactly as sent" is what is tested.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from thena_nb import (
    Agent,
    Message,
    Run,
    Workflow,
    keep_first_and_recent,
    loop,
    parallel,
    tool,
    until_answered,
)
from thena_nb.core.records.model import ModelRequest, render_request
from thena_nb.models import ScriptedModel, reply
from thena_nb.store import MemoryRunStore, SqliteRunStore


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def sent(request: ModelRequest) -> dict[str, Any]:
    """What a request says, as plain data (the model's own log keeps a view of the history)."""
    return {
        "agent": request.agent,
        "system": request.system,
        "messages": [m.model_dump() for m in request.messages],
        "tools": [t.model_dump() for t in request.tools],
        "max_tokens": request.max_tokens,
        "model": request.model,
    }


def adder(n: int, **agent: Any) -> tuple[Workflow, ScriptedModel]:
    """A loop of `n` turns: `n - 1` calls of `add`, then an answer."""
    model = ScriptedModel([reply.tool("add", a=i, b=1) for i in range(n - 1)] + ["done"])
    calc = Agent("Calc", model=model, tools=[add], system="Add.", rescue=False, **agent)
    return Workflow("sums", [loop(steps=[calc], until=until_answered, max_iterations=n)]), model


def sent_to(model: ScriptedModel) -> list[dict[str, Any]]:
    """What `model` received, as plain data (its log keeps each request's view of the
    history, fixed at the length it had then)."""
    return [sent(r) for r in model.requests]


def test_a_finished_run_gives_each_request_as_the_model_received_it() -> None:
    model = ScriptedModel([reply.tool("add", a=i, b=1) for i in range(4)] + ["done"])
    calc = Agent("Calc", model=model, tools=[add], system="Add.", max_tokens=77)
    run = Workflow("sums", [loop(steps=[calc], until=until_answered)]).run("go", store=False)
    assert [sent(run.request_of(t)) for t in run.turns] == sent_to(model)
    assert [sent(run.request_of(t.index)) for t in run.turns] == sent_to(model)
    first = run.request_of(0)
    assert first.system == "Add." and first.max_tokens == 77 and first.model == "scripted"
    assert [t.name for t in first.tools] == ["add"] and first.agent == "Calc"


def test_with_no_history_processor_a_request_is_one_span() -> None:
    wf, _ = adder(30)
    run = wf.run("go", store=False)
    history_lengths = [1 + 2 * k for k in range(30)]
    assert [t.request.messages for t in run.turns if t.request] == [
        ((0, n),) for n in history_lengths
    ]
    # One system prompt and one tool-spec list, kept once for the whole run.
    assert len(run.request_parts) == 2
    assert run.request_parts[run.turns[0].request.system] == "Add."  # type: ignore[union-attr]


def test_a_live_run_gives_the_requests_of_its_turns_so_far() -> None:
    model = ScriptedModel([reply.tool("add", a=1, b=1)] * 3 + ["done"])
    wf = Workflow(
        "sums", [loop(steps=[Agent("Calc", model=model, tools=[add])], until=until_answered)]
    )
    during: list[list[dict[str, Any]]] = []

    async def go() -> Run:
        session = wf.session("go", store=False)
        while await session.step() is not None:
            live = session.result
            during.append([sent(live.request_of(t)) for t in live.turns])
        return session.result

    run = asyncio.run(go())
    assert [len(d) for d in during] == [1, 2, 3, 4] and run.status == "finished"
    assert during[-1] == sent_to(model) == [sent(run.request_of(t)) for t in run.turns]
    assert all(d == sent_to(model)[: len(d)] for d in during)


def test_a_run_loaded_from_sqlite_gives_the_same_requests(tmp_path: Path) -> None:
    model = ScriptedModel([reply.tool("add", a=1, b=2)] * 2 + ["three"])
    calc = Agent("Calc", model=model, tools=[add], system="Add.")
    wf = Workflow("sums", [loop(steps=[calc], until=until_answered)])
    with SqliteRunStore.from_path(tmp_path / "runs.sqlite3") as store:
        run = wf.run("go", store=store)
    with SqliteRunStore.from_path(tmp_path / "runs.sqlite3") as store:
        loaded = Run.load(run.run_id, store=store)
    assert loaded.request_parts == run.request_parts
    assert [sent(loaded.request_of(t)) for t in loaded.turns] == sent_to(model)
    again = Run.from_json(loaded.to_json())
    assert [sent(again.request_of(t)) for t in again.turns] == sent_to(model)


def test_a_processor_that_selects_is_kept_as_spans() -> None:
    model = ScriptedModel([reply.tool("add", a=i, b=1) for i in range(9)] + ["done"])
    calc = Agent("Calc", model=model, tools=[add], history=keep_first_and_recent(3))
    run = Workflow("sums", [loop(steps=[calc], until=until_answered)]).run("go", store=False)
    assert [sent(run.request_of(t)) for t in run.turns] == sent_to(model)
    for turn in run.turns:
        assert turn.request is not None
        parts = turn.request.messages
        assert all(isinstance(p, tuple) for p in parts) and len(parts) <= 2, parts
    assert run.turns[-1].request.messages == ((0, 1), (15, 19))  # type: ignore[union-attr]


def shorten_tool_results(messages: Sequence[Message]) -> Sequence[Message]:
    """Keep every message, but only the first character of each tool result."""
    return [
        m.model_copy(update={"content": m.content[:1]}) if m.role == "tool" else m for m in messages
    ]


def test_a_processor_that_changes_a_message_keeps_that_message_as_sent() -> None:
    model = ScriptedModel([reply.tool("add", a=50, b=50)] * 3 + ["done"])
    calc = Agent("Calc", model=model, tools=[add], history=shorten_tool_results)
    run = Workflow("sums", [loop(steps=[calc], until=until_answered)]).run("go", store=False)
    assert [sent(run.request_of(t)) for t in run.turns] == sent_to(model)
    last = run.turns[-1].request
    assert last is not None
    inline = [p for p in last.messages if isinstance(p, Message)]
    assert [m.content for m in inline] == ["1", "1", "1"]  # "100", shortened
    assert [p for p in last.messages if isinstance(p, tuple)] == [(0, 2), (3, 4), (5, 6)]
    assert run.history[2].content == "100"  # the history itself is unchanged


def test_a_processor_that_adds_and_reorders_messages() -> None:
    def recent_first(messages: Sequence[Message]) -> Sequence[Message]:
        note = Message(role="user", content="(older messages left out)")
        return [messages[-1], note, *messages[:-1:2]]

    model = ScriptedModel([reply.tool("add", a=1, b=1)] * 4 + ["done"])
    calc = Agent("Calc", model=model, tools=[add], history=recent_first)
    run = Workflow("sums", [loop(steps=[calc], until=until_answered)]).run("go", store=False)
    assert [sent(run.request_of(t)) for t in run.turns] == sent_to(model)
    last = run.turns[-1].request
    assert last is not None
    assert [p.content if isinstance(p, Message) else p for p in last.messages] == [
        (8, 9),
        "(older messages left out)",
        (0, 1),
        (2, 3),
        (4, 5),
        (6, 7),
    ]


def branches() -> tuple[Workflow, dict[str, ScriptedModel]]:
    """Three branches of different lengths (one a tool loop, one a nested block), then an
    agent after the block."""
    logs: dict[str, ScriptedModel] = {}

    def agent(name: str, replies: list[Any], **kw: Any) -> Agent:
        model = logs[name] = ScriptedModel(replies, name=name.lower())
        return Agent(name, model=model, system=f"You are {name}.", **kw)

    looper = agent("Loop", [reply.tool("add", a=1, b=1)] * 2 + ["loop done"], tools=[add])
    block = parallel(
        [
            agent("A", ["a"]),
            loop(steps=[looper], until=until_answered),
            parallel(
                [
                    agent("B", ["b"]),
                    loop(
                        steps=[agent("C", [reply.tool("add", a=2, b=2), "c"], tools=[add])],
                        until=until_answered,
                    ),
                ]
            ),
        ]
    )
    calc = agent("Calc", [reply.tool("add", a=1, b=1), "done"], tools=[add])
    after = agent("After", ["the end"])
    return Workflow("w", [loop(steps=[calc], until=until_answered), block, after]), logs


def test_branch_turns_give_exactly_what_their_branch_saw() -> None:
    wf, logs = branches()
    run = wf.run("go", store=False)
    by_agent: dict[str, list[Any]] = {}
    for turn in run.turns:
        by_agent.setdefault(turn.agent, []).append(sent(run.request_of(turn)))
    assert by_agent == {name: sent_to(model) for name, model in logs.items()}
    # Branches see the history as the block opened, plus their own messages only.
    assert [m["content"] for m in by_agent["C"][1]["messages"]] == [
        "go",
        "",
        "2",
        "done",
        "",
        "4",
    ]
    assert len(by_agent["After"][0]["messages"]) == len(run.history) - 1
    moved = [t.request.moved for t in run.turns if t.request and t.request.moved]
    assert moved  # the later branches' positions were moved at the merge


def test_branch_requests_survive_json_and_both_stores(tmp_path: Path) -> None:
    wf, _ = branches()
    memory = MemoryRunStore()
    run = wf.run("go", store=memory)
    expected = [sent(run.request_of(t)) for t in run.turns]
    assert [sent(memory.load(run.run_id).request_of(t)) for t in run.turns] == expected
    assert [sent(Run.from_json(run.to_json()).request_of(t)) for t in run.turns] == expected
    with SqliteRunStore.from_path(tmp_path / "r.sqlite3") as store:
        run = branches()[0].run("go", store=store)
        loaded = store.load(run.run_id)
    assert [sent(loaded.request_of(t)) for t in loaded.turns] == expected


def test_a_replay_keeps_the_recorded_requests() -> None:
    wf, _ = branches()
    first = wf.run("go", store=False)
    replayed = branches()[0].run("go", replay=first, store=False)
    assert all(t.replayed for t in replayed.turns)
    assert [sent(replayed.request_of(t)) for t in replayed.turns] == [
        sent(first.request_of(t)) for t in first.turns
    ]
    assert replayed.request_parts == first.request_parts


def test_a_fork_keeps_what_the_reused_turns_were_sent_and_records_the_new_ones() -> None:
    wf, _ = adder(4)
    first = wf.run("go", store=False)
    forked = first.fork(2, changes={"Calc": {"system": "Be brief."}}, store=False)
    assert [t.replayed for t in forked.turns] == [True, True, False, False]
    systems = [forked.request_of(t).system for t in forked.turns]
    assert systems == ["Add.", "Add.", "Be brief.", "Be brief."]
    assert [sent(forked.request_of(t)) for t in forked.turns[:2]] == [
        sent(first.request_of(t)) for t in first.turns[:2]
    ]
    assert forked.request_of(3).messages == forked.history[:7]
    assert len(forked.request_parts) == 3  # two system prompts, one tool list


def test_a_fork_inside_a_parallel_block_keeps_the_branch_requests() -> None:
    wf, _ = branches()
    first = wf.run("go", store=False)
    at = next(t.index for t in first.turns if t.agent == "B")
    forked = first.fork(at, workflow=branches()[0], store=False)
    assert [sent(forked.request_of(t)) for t in forked.turns] == [
        sent(first.request_of(t)) for t in first.turns
    ]


def test_wire_request_of_an_offline_model_is_the_default_shape() -> None:
    wf, _ = adder(3)
    run = wf.run("go", store=False)
    wire = run.wire_request_of(2)
    assert set(wire) == {"messages", "system", "tools"}
    assert wire == render_request(run.request_of(2))
    assert wire["system"] == "Add." and wire["tools"][0]["name"] == "add"
    assert [m["role"] for m in wire["messages"]] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
    ]
    json.dumps(wire)  # JSON data


class Rendering(ScriptedModel):
    """An offline model with a wire form of its own."""

    def render(self, request: ModelRequest) -> dict[str, Any]:
        return {"model": self.name, "n": len(request.messages), "max_tokens": request.max_tokens}


def test_wire_request_of_uses_the_models_own_render() -> None:
    model = Rendering(["hi"], name="mine")
    run = Workflow("w", [Agent("A", model=model, max_tokens=9)]).run("go", store=False)
    assert run.wire_request_of(0) == {"model": "mine", "n": 1, "max_tokens": 9}
    assert run.wire_request_of(0, model=ScriptedModel([]))["system"] == ""


def test_wire_request_of_a_loaded_run_needs_a_model(tmp_path: Path) -> None:
    wf, _ = adder(2)
    with SqliteRunStore.from_path(tmp_path / "runs.sqlite3") as store:
        run = wf.run("go", store=store)
        loaded = store.load(run.run_id)
    assert loaded.workflow is None
    with pytest.raises(ValueError, match=r"has no workflow .*pass `model=`"):
        loaded.wire_request_of(0)
    assert loaded.wire_request_of(0, model=Rendering([])) == {
        "model": "scripted",
        "n": 1,
        "max_tokens": 1024,
    }


def test_request_of_bad_turns_say_what_is_wrong() -> None:
    wf, _ = adder(2)
    run = wf.run("go", store=False)
    other = adder(3)[0].run("go", store=False)
    with pytest.raises(ValueError, match=r"has turns 0 to 1, not turn 5"):
        run.request_of(5)
    with pytest.raises(TypeError, match=r"a Turn or a turn index"):
        run.request_of("0")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"turn 2 is not a turn of run"):
        run.request_of(other.turns[2])
    old = run.turns[0].model_copy(update={"request": None})
    run.turns[0] = old
    with pytest.raises(ValueError, match=r"turn 0 has no recorded request"):
        run.request_of(0)


def test_an_older_store_file_gains_the_request_parts_table(tmp_path: Path) -> None:
    """A file written before requests were kept is opened, extended, written and read."""
    path = tmp_path / "old.sqlite3"
    wf, _ = adder(2)
    with SqliteRunStore.from_path(path) as store:
        first = wf.run("go", store=store)
    conn = sqlite3.connect(path)
    conn.execute("DROP TABLE thena_request_parts")
    conn.commit()
    conn.close()
    with SqliteRunStore.from_path(path) as store:
        old = store.load(first.run_id)
        assert old.request_parts == {}
        with pytest.raises(ValueError, match=r"does not hold"):
            old.request_of(0)
        again = adder(2)[0].run("go", store=store)
        assert store.load(again.run_id).request_of(1) == again.request_of(1)


def test_a_stored_request_grows_with_the_history_only_by_its_processor(tmp_path: Path) -> None:
    """Without a processor each stored turn's request is a few dozen bytes at any length."""
    wf, _ = adder(200)
    run = wf.run("go", store=False)
    sizes = [len(t.model_dump_json(include={"request"})) for t in run.turns]
    assert max(sizes) - min(sizes) <= 4 and max(sizes) < 140, (min(sizes), max(sizes))


def test_a_resumed_run_keeps_the_requests_of_the_stored_turns(tmp_path: Path) -> None:
    replies: list[Any] = [reply.tool("add", a=1, b=1), reply.error(RuntimeError("down"))]
    failing = ScriptedModel(replies)
    calc = Agent("Calc", model=failing, tools=[add], system="Add.")
    wf = Workflow("sums", [loop(steps=[calc], until=until_answered)])
    with SqliteRunStore.from_path(tmp_path / "runs.sqlite3") as store:
        with pytest.raises(RuntimeError):
            wf.run("go", store=store, run_id="cut")
        working = ScriptedModel([reply.tool("add", a=1, b=1), reply.tool("add", a=2, b=2), "4"])
        fixed = Workflow("sums", [loop(steps=[calc.replace(model=working)], until=until_answered)])
        resumed = fixed.resume("cut", store=store)
        loaded = store.load("cut")
    assert [t.replayed for t in resumed.turns] == [True, False, False, False]
    stored = [sent(loaded.request_of(t)) for t in loaded.turns]
    assert stored == sent_to(failing)[:1] + sent_to(working)
    assert stored == [sent(resumed.request_of(t)) for t in resumed.turns]
    assert loaded.request_parts == resumed.request_parts
