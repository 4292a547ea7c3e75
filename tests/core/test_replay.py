"""Replay: reuse a recorded run's turns with no model call while the requests match."""

from __future__ import annotations

from helpers import add_call, calc, fail_call
from pydantic import BaseModel

from thena_nb import Agent, Context, Workflow, loop, parallel, tool, until_answered
from thena_nb.core.records._keys import HistoryHasher, _message_bytes
from thena_nb.core.records.types import Message, ToolCall
from thena_nb.models import ScriptedModel, reply


def review() -> tuple[Workflow, list[ScriptedModel]]:
    a = Agent("A", model=ScriptedModel(["security ok"]))
    b = Agent("B", model=ScriptedModel(["perf ok"]))
    text_call = '{"name": "add", "arguments": {"a": 2, "b": 3}}'
    worker = calc([add_call(), fail_call(), text_call, "done"], "Worker")
    wf = Workflow("review", [parallel([a, b]), loop(steps=[worker], until=until_answered)])
    return wf, [a.model, b.model, worker.model]  # type: ignore[list-item]


def test_replay_makes_no_model_call_and_reproduces_the_run() -> None:
    wf, models = review()
    first = wf.run("go")
    for m in models:
        m.requests.clear()
    again = wf.run("go", replay=first)
    assert [len(m.requests) for m in models] == [0, 0, 0]
    assert again.replay_diverged_at is None
    assert all(t.replayed and t.attempts == 0 for t in again.turns)
    strip = {"started_at", "duration_s", "replayed", "attempts", "cost_usd", "saved_usd"}
    assert [t.model_dump(exclude=strip) for t in again.turns] == [
        t.model_dump(exclude=strip) for t in first.turns
    ]
    assert again.history == first.history
    assert again.stop_reasons == first.stop_reasons
    spent = {"known_cost_usd", "unpriced_turns", "saved_usd"}  # a replay spends nothing
    assert again.usage.model_dump(exclude=spent) == first.usage.model_dump(exclude=spent)


def test_replay_reuses_tool_results_instead_of_running_tools() -> None:
    ran: list[int] = []

    @tool
    def count(n: int) -> int:
        """Count."""
        ran.append(n)
        return n

    agent = Agent("A", model=ScriptedModel([reply.tool("count", n=1), "ok"]), tools=[count])
    wf = Workflow("w", [loop(steps=[agent], until=until_answered)])
    first = wf.run("go")
    wf.run("go", replay=first)
    assert ran == [1]


def test_replay_goes_live_where_the_request_differs() -> None:
    model = ScriptedModel([add_call(), add_call(), "done"])
    agent = Agent("A", model=model, tools=calc([]).tools)
    wf = Workflow("w", [loop(steps=[agent], until=until_answered)])
    first = wf.run("go")
    model.requests.clear()
    changed = wf.run("something else", replay=first)
    assert changed.replay_diverged_at == 0
    assert len(model.requests) == 3


def test_a_changed_system_prompt_diverges() -> None:
    first_agent = calc([add_call(), "done"], "A")
    first = Workflow("w", [loop(steps=[first_agent], until=until_answered)]).run("go")
    brief = first_agent.replace(system="Be brief.")
    again = Workflow("w", [loop(steps=[brief], until=until_answered)]).run("go", replay=first)
    assert again.replay_diverged_at == 0
    assert not any(t.replayed for t in again.turns)


def test_live_from_reuses_only_the_turns_before() -> None:
    model = ScriptedModel([add_call(), add_call(), add_call(), "done"])
    agent = Agent("A", model=model, tools=calc([]).tools)
    wf = Workflow("w", [loop(steps=[agent], until=until_answered)])
    first = wf.run("go")
    live = ScriptedModel(["answered early"])  # the script of the live part only
    again = Workflow("w", [loop(steps=[agent.replace(model=live)], until=until_answered)])
    forked = again.run("go", replay=first, live_from=2)
    assert [t.replayed for t in forked.turns] == [True, True, False]
    assert len(live.requests) == 1
    assert forked.output == "answered early"
    assert forked.replay_diverged_at is None


def test_replay_restores_state_written_by_tools() -> None:
    class Notes(BaseModel):
        items: list[str] = []

    @tool
    def note(ctx: Context, text: str) -> str:
        """Note it."""
        ctx.state.items.append(text)
        return "ok"

    agent = Agent("A", model=ScriptedModel([reply.tool("note", text="x"), "done"]), tools=[note])
    wf = Workflow("w", [loop(steps=[agent], until=until_answered)], state=Notes)
    first = wf.run("go")
    assert first.states == {0: {"items": ["x"]}, 1: {"items": ["x"]}}
    again = wf.run("go", replay=first)
    assert again.state.items == ["x"]


def test_replay_from_json_round_trip() -> None:
    from thena_nb import Run

    wf, models = review()
    first = wf.run("go")
    loaded = Run.from_json(first.to_json())
    for m in models:
        m.requests.clear()
    again = wf.run("go", replay=loaded)
    assert sum(len(m.requests) for m in models) == 0
    assert again.stop_reasons == first.stop_reasons


def _racing_rescuers() -> Workflow:
    """Two branches whose one reply is a tool call written as text; the first answers last."""
    text = '{"name": "add", "arguments": {"a": 2, "b": 3}}'
    slow = Agent("Slow", model=ScriptedModel([text], delay=0.05), tools=calc([]).tools)
    fast = Agent("Fast", model=ScriptedModel([text]), tools=calc([]).tools)
    return Workflow("race", [parallel([slow, fast])])


def test_rescued_ids_survive_replay_fork_and_resume_of_out_of_order_branches() -> None:
    """Rescued call ids come from the turn's request and the call's position, so a replay
    (which serves branches without waiting) gets the ids the live run had."""
    from thena_nb.store import MemoryRunStore

    wf = _racing_rescuers()
    store = MemoryRunStore()
    first = wf.run("go", store=store)
    ids = [c.id for t in first.turns for c in t.tool_calls]
    assert len(set(ids)) == 2 and all(i.startswith("rescued-") for i in ids)
    assert all(c.ok for t in first.turns for c in t.tool_calls)

    replayed = wf.run("go", replay=first, store=False)
    assert replayed.replay_diverged_at is None
    assert [c.id for t in replayed.turns for c in t.tool_calls] == ids
    assert all(t.replayed for t in replayed.turns)

    forked = first.fork(1, store=False)
    assert [c.id for t in forked.turns for c in t.tool_calls] == ids

    resumed = wf.resume(first.run_id, store=store)
    assert resumed.status == "finished"
    assert [c.id for t in resumed.turns for c in t.tool_calls] == ids


def test_a_fork_with_a_changed_agent_reuses_its_rescued_calls() -> None:
    """A changed agent asks with another request key; the reused turns keep the calls (and
    ids) they were recorded with, so their recorded results still match."""
    text = '{"name": "add", "arguments": {"a": 2, "b": 3}}'
    agent = Agent("Calc", model=ScriptedModel([text, text, "done"]), tools=calc([]).tools)
    wf = Workflow("w", [loop(steps=[agent], until=until_answered)])
    first = wf.run("go", store=False)
    live = ScriptedModel(["changed answer"])
    forked = first.fork(2, changes={"Calc": {"system": "x", "model": live}}, store=False)
    assert [t.replayed for t in forked.turns] == [True, True, False]
    assert [c.id for t in forked.turns[:2] for c in t.tool_calls] == [
        c.id for t in first.turns[:2] for c in t.tool_calls
    ]
    assert forked.output == "changed answer"


def test_request_keys_are_the_bytes_stored_runs_were_keyed_with() -> None:
    # Stored runs hold these keys: if the bytes a message adds ever changed, a replay of a
    # run stored before would go live from its first turn, paying for every call again.
    calls = [
        ToolCall(id="call_1_0", name="add", arguments={"a": 2, "b": 3}),
        ToolCall(
            id="rescued-0123456789ab-1",
            name="lookup",
            arguments={"q": 'naïve "x"\n', "tags": ["a", 1, None, 2.5], "nested": {"k": True}},
            source="rescued",
        ),
    ]
    history = [
        Message(role="user", content="Résumé: add 2 and 3 — «quoted» 'x'"),
        Message(role="assistant", agent="Calc", content="", tool_calls=calls),
        Message(role="tool", agent="Calc", content="5", tool_call_id="call_1_0"),
        Message(
            role="tool",
            agent="Calc",
            content="Error: boom",
            tool_call_id=calls[1].id,
            is_error=True,
        ),
        Message(
            role="assistant",
            agent="Calc",
            content="5, and 'done'",
            tool_calls=[ToolCall(id="c", name="add", arguments={})],
        ),
        Message(role="assistant", agent="Calc", content="done"),
    ]
    for m in history:  # the calls as `repr` of their (id, name, arguments, source) tuples
        d = m.__dict__
        shown = repr([(c.id, c.name, c.arguments, c.source) for c in m.tool_calls])
        expected = (
            f"{d['role']}\x1e{d['agent']}\x1e{d['content']}\x1e{d['tool_call_id']}"
            f"\x1e{d['is_error']}\x1e{shown if m.tool_calls else ''}\x1d"
        )
        assert _message_bytes(m) == expected.encode()
    assert HistoryHasher().request_key(history, "agent-key") == "cfd775ac20a16e6d43c4dba02d5d0847"
    hasher = HistoryHasher()  # a running hash: the same key, one message at a time
    for i in range(1, len(history) + 1):
        key = hasher.request_key(history[:i], "agent-key")
    assert key == "cfd775ac20a16e6d43c4dba02d5d0847"
