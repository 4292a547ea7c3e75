"""Interrupted runs: Ctrl-C in a plain script keeps the partial run (`exc.run`, status
`stopped`), and a resumed offline run never reuses a tool-call id already in its history."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from helpers import calc

from thena_nb import Agent, Workflow, last_run, loop, until_answered
from thena_nb.core.runs.run import INTERRUPTED
from thena_nb.models import FunctionModel, ScriptedModel, reply
from thena_nb.models._offline import call_number
from thena_nb.store import MemoryRunStore

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent(
    """
    import json, os, signal, threading
    from thena_nb import Agent, Workflow, last_run, loop, tool, until_answered
    from thena_nb.models import ScriptedModel, reply

    @tool
    def add(a: int, b: int) -> int:
        '''Add.'''
        return a + b

    model = ScriptedModel([reply.tool("add", a=1, b=2)] * 500, delay=0.02)
    wf = Workflow("w", [loop(steps=[Agent("A", model=model, tools=[add])],
                             until=until_answered, max_iterations=500)])
    threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
    try:
        wf.run("go", store=False)
        print(json.dumps({"interrupted": False}))
    except KeyboardInterrupt as exc:
        run = getattr(exc, "run", None)
        print(json.dumps({
            "interrupted": True,
            "has_run": run is not None,
            "status": run and run.status,
            "turns": run and len(run.turns),
            "error": run and run.error,
            "loop": run and run.loops[0].stop_reason,
            "last_run": last_run() is run,
        }))
    """
)


def test_ctrl_c_in_a_plain_script_keeps_exc_run_and_the_run_is_stopped() -> None:
    """`asyncio.run`'s own SIGINT handling raises a fresh `KeyboardInterrupt`: it carries the
    partial run all the same."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=60
    )
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["interrupted"] and seen["has_run"], seen
    assert seen["status"] == "stopped" and seen["turns"] >= 2
    assert seen["error"] == INTERRUPTED and seen["loop"] == "stop" and seen["last_run"]


def failing_once(failures_at: int) -> FunctionModel:
    count = {"n": 0}

    def answer(request: object) -> object:
        count["n"] += 1
        if count["n"] == failures_at:
            raise RuntimeError("down")
        return "done" if count["n"] > 5 else reply.tool("add", a=1, b=2)

    return FunctionModel(answer)


def test_a_resumed_offline_run_gets_tool_call_ids_not_already_in_its_history() -> None:
    for model in (failing_once(3), None):
        if model is None:  # the same with a script: its calls count from 1 again on resume
            model = ScriptedModel(
                [reply.tool("add", a=1, b=2)] * 2 + [reply.error(RuntimeError("down"))]
            )
        agent = Agent("A", model=model, tools=calc([]).tools)
        wf = Workflow("w", [loop(steps=[agent], until=until_answered, max_iterations=4)])
        store = MemoryRunStore()
        try:
            wf.run("x", store=store)
        except RuntimeError as exc:
            run = exc.run  # type: ignore[attr-defined]
        assert [c.id for t in run.turns for c in t.tool_calls] == ["call_1_0", "call_2_0"]
        done = wf.resume(run.run_id, store=store)
        ids = [m.tool_call_id for m in done.history if m.role == "tool"]
        assert len(ids) > 2 and len(set(ids)) == len(ids), ids
        assert ids[:2] == ["call_1_0", "call_2_0"]  # the recorded ones are kept


def test_an_offline_models_first_ids_continue_after_another_models() -> None:
    a = Agent("A", model=ScriptedModel([reply.tool("add", a=1, b=1), "a"]), tools=calc([]).tools)
    b = Agent("B", model=ScriptedModel([reply.tool("add", a=2, b=2), "b"]), tools=calc([]).tools)
    run = Workflow("w", [a, b, a, b]).run("x", store=False)
    ids = [c.id for t in run.turns for c in t.tool_calls]
    assert ids == ["call_1_0", "call_2_0"]
    assert last_run() is run


def test_call_numbers_continue_past_the_history() -> None:
    from thena_nb.core.records.types import Message, ToolCall

    def asked(*ids: str) -> Message:
        calls = [ToolCall(id=i, name="add") for i in ids]
        return Message(role="assistant", content="", tool_calls=calls)

    assert call_number([], 1) == 1
    assert call_number([asked("call_4_0", "call_4_1"), Message(role="tool", content="")], 2) == 5
    assert call_number([asked("call_2_0"), asked("toolu_x")], 7) == 7
    assert call_number([asked("call_9_0"), asked("toolu_x")], 1) == 10
