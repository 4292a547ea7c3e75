"""Bad input gets a clear error and loses nothing."""

from __future__ import annotations

import pytest
from helpers import add_call, calc

from thena_nb import Agent, Workflow, loop, until_answered
from thena_nb.core.records.errors import (
    ModelError,
    ScriptExhaustedError,
    ThenaError,
    TransientModelError,
)
from thena_nb.models import FunctionModel, ScriptedModel, reply


def test_the_error_tree() -> None:
    assert issubclass(ScriptExhaustedError, ModelError)
    assert issubclass(TransientModelError, ModelError)
    assert issubclass(ModelError, ThenaError)
    err = TransientModelError("slow down", retry_after=2.5, status_code=429)
    assert (err.retry_after, err.status_code) == (2.5, 429)


def test_a_scripted_model_that_runs_out_names_the_model_and_the_call() -> None:
    wf = Workflow("w", [loop(steps=[calc([add_call(), add_call()])], until=until_answered)])
    with pytest.raises(ScriptExhaustedError) as info:
        wf.run("go")
    message = str(info.value)
    assert "ScriptedModel 'scripted' has no reply for call 3" in message
    assert "holds 2 replies" in message
    assert info.value.run.status == "failed"  # type: ignore[attr-defined]
    assert len(info.value.run.turns) == 2  # type: ignore[attr-defined]


def test_a_scripted_model_starts_again_for_every_run() -> None:
    model = ScriptedModel(["first", "second"])
    wf = Workflow("w", [Agent("A", model=model)])
    assert wf.run("a").output == "first"
    assert wf.run("b").output == "first"
    assert len(model.requests) == 2


def test_a_model_that_raises() -> None:
    def broken(request: object) -> str:
        raise ConnectionRefusedError("no server")

    wf = Workflow("w", [Agent("A", model=FunctionModel(broken))])
    with pytest.raises(ConnectionRefusedError) as info:
        wf.run("go")
    assert "in turn 0 of agent 'A' at 'w/0.A'" in info.value.__notes__
    assert info.value.run.report.children[0].error  # type: ignore[attr-defined]


def test_function_model_error_reply() -> None:
    wf = Workflow("w", [Agent("A", model=FunctionModel(lambda r: reply.error(ValueError("x"))))])
    with pytest.raises(ValueError):
        wf.run("go")


def test_an_until_that_raises_names_the_loop() -> None:
    def until(ctx: object) -> bool:
        raise LookupError("no verdict yet")

    with pytest.raises(LookupError) as info:
        Workflow("review", [loop(steps=[calc(["a"])], until=until)]).run("go")
    assert "raised by `until` of loop 'review/0.loop' after iteration 1" in info.value.__notes__
    run = info.value.run  # type: ignore[attr-defined]
    assert run.loops[0].stop_reason is None and "LookupError" in run.loops[0].error
    assert len(run.turns) == 1


def test_a_function_step_that_raises_keeps_its_type() -> None:
    class Mine(Exception):
        pass

    def step(ctx: object) -> None:
        raise Mine("bad")

    with pytest.raises(Mine) as info:
        Workflow("w", [calc(["a"]), step]).run("go")
    assert "in function step 'w/1.step'" in info.value.__notes__
    assert info.value.run.output == "a"  # type: ignore[attr-defined]


def test_on_fail_and_on_exhausted_errors_name_the_loop() -> None:
    def on_fail(ctx: object, info: object) -> None:
        raise RuntimeError("hook")

    with pytest.raises(RuntimeError) as info:
        Workflow(
            "w", [loop(steps=[calc([reply.tool("fail")])], until=until_answered, on_fail=on_fail)]
        ).run("go")
    assert "in `on_fail` of loop 'w/0.loop'" in info.value.__notes__

    def on_exhausted(ctx: object, n: int) -> None:
        raise RuntimeError("hook")

    with pytest.raises(RuntimeError) as info:
        Workflow(
            "w",
            [
                loop(
                    steps=[calc([add_call()])],
                    until=until_answered,
                    max_iterations=1,
                    on_exhausted=on_exhausted,
                )
            ],
        ).run("go")
    assert "in `on_exhausted` of loop 'w/0.loop'" in info.value.__notes__


def test_scripted_model_rejects_bad_script_items() -> None:
    with pytest.raises(TypeError, match="reply 2 must be"):
        ScriptedModel(["ok", 42])  # type: ignore[list-item]


def test_run_works_inside_a_running_event_loop() -> None:
    """`wf.run()` works where a loop is already running (as in Jupyter)."""
    import asyncio

    wf = Workflow("w", [Agent("A", model=ScriptedModel(["hi"]))])

    async def inside() -> str:
        return wf.run("go").output

    assert asyncio.run(inside()) == "hi"


def test_run_inside_a_loop_reraises_the_original_error() -> None:
    import asyncio

    wf = Workflow("w", [Agent("A", model=ScriptedModel([]))])

    async def inside() -> None:
        wf.run("go")

    with pytest.raises(ScriptExhaustedError):
        asyncio.run(inside())


def test_a_keyboard_interrupt_in_jupyter_keeps_every_finished_turn() -> None:
    """Under a running loop (as in Jupyter) an interrupt cancels the run and hands it over."""
    import asyncio
    import os
    import signal
    import threading

    model = ScriptedModel([add_call()] * 50, delay=0.02)
    wf = Workflow(
        "w", [loop(steps=[Agent("A", model=model, tools=calc([]).tools)], until=until_answered)]
    )

    async def inside() -> None:
        threading.Timer(0.15, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
        wf.run("go", store=False)

    # A loop run by hand, as a kernel runs its own: asyncio.run would catch SIGINT itself.
    kernel_loop = asyncio.new_event_loop()
    try:
        with pytest.raises(KeyboardInterrupt) as info:
            kernel_loop.run_until_complete(inside())
    finally:
        kernel_loop.close()
    run = info.value.run  # type: ignore[attr-defined]
    assert run.status == "stopped" and len(run.turns) >= 2
    calls = len(model.requests)
    import time

    time.sleep(0.1)
    assert len(model.requests) == calls  # the run really stopped
