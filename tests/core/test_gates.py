"""Tool gates: a gated call waits for a `Decision` before any tool of its turn runs."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from gate_worker import FIRST_CALLS, model_calls, shop

from thena_nb import (
    Agent,
    Decision,
    GateError,
    PendingCall,
    Run,
    ToolCall,
    Workflow,
    parallel,
    tool,
)
from thena_nb.core.engine._replay import Replay
from thena_nb.core.engine.session import Session
from thena_nb.models import ScriptedModel, reply
from thena_nb.store import MemoryRunStore, SqliteRunStore

WORKER = Path(__file__).with_name("gate_worker.py")

pytestmark = pytest.mark.anyio

Ran = list[tuple[str, Any]]


def ids_of(calls: list[PendingCall]) -> list[str]:
    return [p.call.id for p in calls]


def by_name(turn_calls: list[ToolCall]) -> dict[tuple[str, int], ToolCall]:
    return {(c.name, i): c for i, c in enumerate(turn_calls)}


# -- a stepped session -----------------------------------------------------------------------


async def test_a_stepped_session_pauses_before_tools_and_takes_all_four_decisions() -> None:
    ran: Ran = []
    wf = shop(ran)
    s = wf.session("settle", store=False)
    s.gates.append(lambda call: True)  # every call, beside the tools' own gates
    assert await s.step() is None  # the model call ran; no tool did
    assert s.paused_at == "tools" and ran == [] and len(s.result.turns) == 0
    pending = s.pending
    assert [p.call.name for p in pending] == ["pay", "pay", "refund", "note"]
    assert {(p.turn_index, p.step_path, p.agent) for p in pending} == {
        (0, "shop/0.loop/0.Clerk", "Clerk")
    }
    big, small, refund, note = ids_of(pending)
    s.decide(big, Decision.approve())
    s.decide(small, Decision.edit({"amount": 30}))
    s.decide(refund, Decision.reject("refunds need a manager"))
    with pytest.raises(GateError, match=note):
        await s.step()  # one call is still undecided
    s.decide(note, Decision.respond({"noted": True}))
    assert s.pending == []
    turn = await s.step()
    assert turn is not None and s.paused_at == "model"  # before the next model call
    assert ran == [("pay", 500), ("pay", 30)]  # rejected and answered calls never ran
    c = turn.tool_calls
    assert [x.decision for x in c] == ["approve", "edit", "reject", "respond"]
    assert (c[0].ok, c[0].result) == (True, "paid 500")
    assert (c[1].arguments, c[1].original_arguments, c[1].result) == (
        {"amount": 30},
        {"amount": 20},
        "paid 30",
    )
    assert (c[2].ok, c[2].error) == (
        False,
        "Error: tool 'refund' was not run: refunds need a manager",
    )
    assert (c[3].ok, c[3].result) == (True, '{"noted": true}')
    tool_messages = [m for m in s.result.history if m.role == "tool"]
    assert [m.content for m in tool_messages] == [
        "paid 500",
        "paid 30",
        "Error: tool 'refund' was not run: refunds need a manager",
        '{"noted": true}',
    ]
    assert [m.is_error for m in tool_messages] == [False, False, True, False]
    # The history keeps the calls as the model made them.
    assistant = next(m for m in s.result.history if m.role == "assistant")
    assert [(tc.name, tc.arguments) for tc in assistant.tool_calls] == FIRST_CALLS
    run = await s.run()
    assert run.status == "finished" and run.output == "All done."


async def test_only_the_calls_a_gate_holds_wait_and_run_also_pauses_there() -> None:
    ran: Ran = []
    s = shop(ran).session("settle", store=False)
    run = await s.run()  # run() pauses at a gate as it does at a breakpoint
    assert not s.done and run.status == "running" and s.paused_at == "tools"
    assert [(p.call.name, p.call.arguments) for p in s.pending] == [
        ("pay", {"amount": 500}),
        ("refund", {"amount": 7}),
    ]
    with pytest.raises(GateError, match="wait for a decision"):
        await s.run()
    for p in s.pending:
        s.decide(p.call.id, Decision.approve())
    run = await s.run()
    assert run.status == "finished"
    assert sorted(ran) == [("note", "paid"), ("pay", 20), ("pay", 500), ("refund", 7)]
    decisions = [c.decision for c in run.turns[0].tool_calls]
    assert decisions == ["approve", None, "approve", None]  # ungated calls carry none


async def test_a_bad_edit_or_an_unknown_call_id_raises_and_the_call_stays_pending() -> None:
    s = shop([]).session("settle", store=False)
    await s.step()
    big = s.pending[0].call.id
    with pytest.raises(GateError, match="do not fit tool 'pay'") as info:
        s.decide(big, Decision.edit({"amount": "a lot"}))
    assert "amount" in str(info.value)
    with pytest.raises(GateError, match="do not fit"):
        s.decide(big, Decision.edit({"sum": 5}))
    with pytest.raises(GateError, match=r"no pending call 'nope'.*" + big):
        s.decide("nope", Decision.approve())
    with pytest.raises(TypeError, match="must be a `Decision`"):
        s.decide(big, "yes")  # type: ignore[arg-type]
    assert big in ids_of(s.pending)
    with pytest.raises(ValueError, match="needs `arguments`"):
        Decision(kind="edit")
    s.stop()
    assert (await s.run()).status == "stopped" and s.done


async def test_stop_while_held_stops_the_run_keeps_the_turn_and_no_tool_runs() -> None:
    """S28: `stop()` at a gate keeps the turn (its reply and calls, none run), then stops."""
    ran: Ran = []
    store = MemoryRunStore()
    s = shop(ran).session("settle", store=store)
    await s.step()
    assert s.pending
    s.stop()
    assert s.done
    run = await s.run()
    assert run.status == "stopped" and ran == [] and run.error is None
    assert run.loops[0].stop_reason == "stop"
    [turn] = run.turns
    assert [c.name for c in turn.tool_calls] == [name for name, _ in FIRST_CALLS]
    not_run = "was not run: the run was stopped before it ran"
    assert all(c.ok is False and not_run in (c.error or "") for c in turn.tool_calls)
    assert [m.role for m in run.history] == ["user", "assistant", *["tool"] * 4]
    assert s.pending == [] and await s.step() is None
    loaded = store.load(run.run_id)
    assert loaded.status == "stopped" and loaded.turns == run.turns


async def test_with_pause_before_tools_a_gate_pauses_the_turn_once() -> None:
    ran: Ran = []
    s = shop(ran).session("settle", store=False)
    s.pause_before_tools = True
    assert await s.step() is None and s.paused_at == "tools" and len(s.pending) == 2
    for p in s.pending:
        s.decide(p.call.id, Decision.approve())
    turn = await s.step()
    assert turn is not None and len(ran) == 4


# -- approve= --------------------------------------------------------------------------------


def test_approve_decides_every_gated_call_sync_or_async() -> None:
    seen: list[PendingCall] = []

    def sync(p: PendingCall) -> Decision:
        seen.append(p)
        if p.call.name == "refund":
            return Decision.respond("refund queued")
        return Decision.edit({"amount": 99})

    ran: Ran = []
    run = shop(ran).run("settle", store=False, approve=sync)
    assert run.status == "finished" and [p.call.name for p in seen] == ["pay", "refund"]
    assert ran == [("pay", 99), ("pay", 20), ("note", "paid")]
    assert [c.decision for c in run.turns[0].tool_calls] == ["edit", None, "respond", None]

    async def later(p: PendingCall) -> Decision:
        await asyncio.sleep(0)
        return Decision.reject(f"no {p.call.name}")

    ran2: Ran = []
    run = shop(ran2).run("settle", store=False, approve=later)
    assert ran2 == [("pay", 20), ("note", "paid")]
    errors = [c.error for c in run.turns[0].tool_calls if c.decision == "reject"]
    assert errors == [
        "Error: tool 'pay' was not run: no pay",
        "Error: tool 'refund' was not run: no refund",
    ]


def test_approve_that_returns_no_decision_or_a_bad_edit_fails_the_run() -> None:
    with pytest.raises(TypeError, match="must be a `Decision`") as info:
        shop([]).run("settle", store=False, approve=lambda p: True)  # type: ignore[arg-type, return-value]
    assert info.value.run.status == "failed"  # type: ignore[attr-defined]
    with pytest.raises(GateError, match="do not fit tool 'pay'"):
        shop([]).run("settle", store=False, approve=lambda p: Decision.edit({"amount": "x"}))


def test_parallel_tools_hold_every_gated_call_together_and_keep_call_order() -> None:
    started: list[str] = []

    async def slow(name: str, delay: float) -> str:
        started.append(name)
        await asyncio.sleep(delay)
        return name

    @tool(gate=True)
    async def first() -> str:
        """Slow."""
        return await slow("first", 0.05)

    @tool
    async def second() -> str:
        """Fast."""
        return await slow("second", 0.0)

    @tool(gate=True)
    async def third() -> str:
        """Fast."""
        return await slow("third", 0.0)

    model = ScriptedModel([reply.calls([("first", {}), ("second", {}), ("third", {})])])
    agent = Agent("P", model=model, tools=[first, second, third], parallel_tools=True)
    wf = Workflow("p", [agent])

    async def go() -> Any:
        s = wf.session("x", store=False)
        await s.step()
        held = [p.call.name for p in s.pending]
        assert started == []  # no tool of the turn ran, the ungated one neither
        for p in s.pending:
            s.decide(p.call.id, Decision.approve())
        return held, await s.step()

    held, turn = asyncio.run(go())
    assert held == ["first", "third"]
    assert [c.result for c in turn.tool_calls] == ["first", "second", "third"]
    assert started[0] == "first" and len(started) == 3  # ran together


def test_inside_a_parallel_block_approve_decides_and_a_pause_is_a_clear_error() -> None:
    def branch(name: str) -> Agent:
        refund = tool(lambda amount: f"refunded {amount}", name="refund", gate=True)
        model = ScriptedModel([reply.tool("refund", amount=3)])
        return Agent(name, model=model, tools=[refund])

    wf = Workflow("par", [parallel([branch("A"), branch("B")])])
    run = wf.run("x", store=False, approve=lambda p: Decision.respond(f"{p.agent} ok"))
    assert run.status == "finished"
    assert [(t.agent, t.tool_calls[0].result) for t in run.turns] == [("A", "A ok"), ("B", "B ok")]
    with pytest.raises(GateError, match="only `approve=` can decide"):
        wf.run("x", store=False)


# -- waiting runs ----------------------------------------------------------------------------


def test_a_run_that_reaches_a_gate_waits_is_stored_and_resumes_with_decisions() -> None:
    store = MemoryRunStore()
    ran: Ran = []
    wf = shop(ran)
    run = wf.run("settle", store=store)
    assert run.status == "waiting" and ran == [] and run.turns == []
    assert [p.call.arguments for p in run.pending] == [{"amount": 500}, {"amount": 7}]
    assert run.pending_turn is not None and len(run.pending_turn.tool_calls) == 4
    assert run.loops[0].stop_reason is None
    stored = store.load(run.run_id)
    assert stored.status == "waiting" and ids_of(stored.pending) == ids_of(run.pending)
    assert [r["status"] for r in store.list_runs()] == ["waiting"]
    big, refund = ids_of(run.pending)
    before = model_calls(wf)
    done = wf.resume(
        run.run_id,
        store=store,
        decisions={big: Decision.edit({"amount": 50}), refund: Decision.reject("no")},
    )
    assert done.status == "finished" and done.run_id == run.run_id and done.pending == []
    assert model_calls(wf) == before + 1  # the final answer only: the waiting reply is reused
    assert ran == [("pay", 50), ("pay", 20), ("note", "paid")]
    # The waiting turn's reply is reused (no model call), but its tools ran now: not replayed.
    assert [(t.replayed, t.attempts) for t in done.turns] == [(False, 0), (False, 1)]
    assert store.load(run.run_id).status == "finished"
    assert store.load(run.run_id).turns[0].tool_calls[0].original_arguments == {"amount": 500}


def test_resume_names_unknown_and_missing_decisions() -> None:
    store = MemoryRunStore()
    wf = shop([])
    run = wf.run("settle", store=store)
    big, refund = ids_of(run.pending)
    with pytest.raises(GateError, match=rf"no pending call 'ghost'.*{big}.*{refund}"):
        wf.resume(run.run_id, store=store, decisions={"ghost": Decision.approve()})
    with pytest.raises(GateError, match=rf"waits for decisions on tool calls '{refund}'"):
        wf.resume(run.run_id, store=store, decisions={big: Decision.approve()})
    with pytest.raises(GateError, match="do not fit tool 'refund'"):
        wf.resume(
            run.run_id,
            store=store,
            decisions={big: Decision.approve(), refund: Decision.edit({"amount": -1.5})},
        )
    assert store.load(run.run_id).status == "waiting"  # nothing ran
    done = wf.resume(
        run.run_id,
        store=store,
        decisions={big: Decision.approve()},
        approve=lambda p: Decision.respond("handled"),
    )
    assert done.status == "finished"
    with pytest.raises(GateError, match="is not waiting"):
        wf.resume(run.run_id, store=store, decisions={big: Decision.approve()})


def worker(*args: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, str(WORKER), *args], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    data: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return data


def test_waiting_then_resume_in_another_process_with_a_sqlite_file(tmp_path: Path) -> None:
    db = str(tmp_path / "runs.sqlite3")
    first = worker("start", db)
    assert first["status"] == "waiting" and first["ran"] == []
    assert first["model_calls"] == 1 and len(first["pending"]) == 2
    big, refund = first["pending"]
    decisions = {
        big: Decision.respond("paid by hand").model_dump(),
        refund: Decision.approve().model_dump(),
    }
    second = worker("resume", db, first["run_id"], json.dumps(decisions))
    assert second["run_id"] == first["run_id"] and second["status"] == "finished"
    assert second["model_calls"] == 1  # the answer; the waiting turn's reply came from the file
    assert second["ran"] == [["pay", 20], ["refund", 7], ["note", "paid"]]
    calls = second["calls"][0]
    assert [(c["decision"], c["result"]) for c in calls] == [
        ("respond", "paid by hand"),
        (None, "paid 20"),
        ("approve", "refunded 7"),
        (None, "noted"),
    ]
    with SqliteRunStore.from_path(db) as store:
        loaded = store.load(first["run_id"])
    assert loaded.status == "finished" and loaded.output == "All done." and loaded.pending == []


def test_a_waiting_run_round_trips_through_json_and_sqlite(tmp_path: Path) -> None:
    run = shop([]).run("settle", store=False)
    again = Run.from_json(run.to_json())
    assert again.status == "waiting" and again.pending == run.pending
    assert again.pending_turn == run.pending_turn
    with SqliteRunStore.from_path(tmp_path / "r.sqlite3") as store:
        stored = shop([]).run("settle", store=store)
        loaded = store.load(stored.run_id)
    assert loaded.pending == stored.pending and loaded.pending_turn == stored.pending_turn


def test_an_older_sqlite_file_without_the_pending_column_loads_and_gains_it(
    tmp_path: Path,
) -> None:
    import sqlite3

    path = tmp_path / "old.sqlite3"
    with SqliteRunStore.from_path(path) as store:
        run = shop([]).run("settle", store=store, approve=lambda p: Decision.approve())
    conn = sqlite3.connect(path)
    conn.execute("ALTER TABLE thena_runs DROP COLUMN pending")
    conn.commit()
    conn.close()
    with SqliteRunStore.from_path(path) as store:
        loaded = store.load(run.run_id)
        assert loaded.status == "finished" and loaded.pending == []
        waiting = shop([]).run("settle", store=store)
        assert len(store.load(waiting.run_id).pending) == 2


# -- replay, fork and resume reproduce decisions -----------------------------------------------


def decided_run(ran: Ran) -> tuple[Workflow, Run]:
    """A run whose gated calls were edited, rejected and answered."""
    wf = shop(ran)
    decisions = iter([Decision.edit({"amount": 42}), Decision.reject("no refunds")])
    session_gates = [lambda call: call.name == "note"]

    async def go() -> Run:
        s = wf.session("settle", store=False, at_gate="wait")
        s.gates.extend(session_gates)
        s._keeper.approve = lambda p: (  # every note is answered by hand
            Decision.respond("noted by hand") if p.call.name == "note" else next(decisions)
        )
        return await s.run()

    return wf, asyncio.run(go())


def test_a_replay_of_a_decided_run_gives_identical_turns_with_no_model_or_tool_call() -> None:
    ran: Ran = []
    wf, run = decided_run(ran)
    assert [c.decision for c in run.turns[0].tool_calls] == ["edit", None, "reject", "respond"]
    assert ran == [("pay", 42), ("pay", 20)]
    calls_before, ran_before = model_calls(wf), list(ran)

    def never(p: PendingCall) -> Decision:
        raise AssertionError("a replay asked again")

    again = wf.run("settle", replay=run, store=False, approve=never)
    assert model_calls(wf) == calls_before and ran == ran_before
    assert again.replay_diverged_at is None and all(t.replayed for t in again.turns)
    strip = {"started_at", "duration_s", "replayed", "attempts", "cost_usd", "saved_usd"}
    assert [t.model_dump(exclude=strip) for t in again.turns] == [
        t.model_dump(exclude=strip) for t in run.turns
    ]
    assert again.history == run.history and again.output == run.output
    forked = run.fork(len(run.turns), store=False)  # a fork reuses them too, without asking
    assert model_calls(wf) == calls_before and ran == ran_before
    assert [t.tool_calls for t in forked.turns] == [t.tool_calls for t in run.turns]


def test_a_replay_that_runs_tools_again_applies_the_recorded_decisions() -> None:
    ran: Ran = []
    wf, run = decided_run(ran)
    ran.clear()

    async def go() -> Run:
        replay = Replay(run, rerun_tools=True)
        s = Session(wf, "settle", replay=replay, at_gate="wait")
        s.gates.append(lambda call: call.name == "note")  # as in the recorded run
        return await s.run()

    again = asyncio.run(go())
    assert again.status == "finished"
    assert ran == [("pay", 42), ("pay", 20)]  # the edit again; rejected, answered: not run
    assert [t.tool_calls for t in again.turns] == [t.tool_calls for t in run.turns]


def test_with_no_gate_nothing_is_held_and_no_decision_is_recorded() -> None:
    wf = Workflow("plain", [Agent("A", model=ScriptedModel([reply.tool("add", a=1)]), tools=[])])
    agent = wf.steps[0]
    assert agent._gated is False
    assert shop([]).steps[0].steps[0]._gated is True
    run = wf.run("x", store=False)
    assert run.status == "finished" and run.turns[0].tool_calls[0].decision is None


def test_a_resume_that_goes_live_before_the_waiting_turn_asks_again() -> None:
    store = MemoryRunStore()
    ran: Ran = []
    wf = shop(ran)
    run = wf.run("settle", store=store)
    wf.steps[0].steps[0].system = "A changed prompt."  # the waiting turn's request differs
    decisions = {i: Decision.approve() for i in ids_of(run.pending)}
    again = wf.resume(run.run_id, store=store, decisions=decisions)
    # The model was asked anew; its calls have the same ids but are not the decided ones.
    assert again.replay_diverged_at == 0 and again.status == "waiting" and ran == []
    assert ids_of(again.pending) == ids_of(run.pending)
