"""A keyboard interrupt during `wf.run` in a notebook cell prints one short line naming
where the partial run is (`thena_nb.last_run()`, `exc.run`), not the machinery's
traceback; the run's status is `stopped`. Tested with a real IPython `InteractiveShell`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

import thena_nb
from thena_nb.notebook._interrupt import install, uninstall

SETUP = """
import os, signal, threading
from thena_nb import Agent, Workflow, loop, tool, until_answered
from thena_nb.models import ScriptedModel, reply

@tool
def add(a: int, b: int) -> int:
    '''Add.'''
    return a + b

model = ScriptedModel([reply.tool("add", a=1, b=2)] * 500, delay=0.02)
wf = Workflow("interrupted", [loop(steps=[Agent("A", model=model, tools=[add])],
                                   until=until_answered, max_iterations=500)])
"""

CELL = """
threading.Timer(0.4, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
wf.run("go", store=False)
"""

KERNEL_CELL = """
import asyncio
async def in_the_kernel_loop():  # as a kernel runs a cell: under a running event loop
    wf.run("go", store=False)
loop_ = asyncio.new_event_loop()
threading.Timer(0.4, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
try:
    loop_.run_until_complete(in_the_kernel_loop())
finally:
    loop_.close()
"""


@pytest.fixture
def shell() -> Iterator[InteractiveShell]:
    ip = InteractiveShell.instance()
    ip.reset(new_session=False)
    uninstall(ip)
    ip.set_custom_exc((), None)
    yield ip
    uninstall(ip)
    ip.reset(new_session=False)


def one_line_shown(ip: InteractiveShell, cell: str) -> str:
    with capture_output() as cap:
        result = ip.run_cell(cell)
    assert isinstance(result.error_in_exec, KeyboardInterrupt)
    return cap.stdout + cap.stderr


def test_an_interrupted_run_in_a_cell_is_one_line_naming_the_partial_run(
    shell: InteractiveShell,
) -> None:
    shell.run_line_magic("load_ext", "thena_nb")
    assert shell.run_cell(SETUP).success
    shown = one_line_shown(shell, CELL)
    run = thena_nb.last_run()
    assert run is not None and run.workflow_name == "interrupted"
    assert run.status == "stopped" and len(run.turns) >= 2
    lines = [line for line in shown.splitlines() if line.strip()]
    assert lines == [
        f"KeyboardInterrupt: run {run.run_id!r} of workflow 'interrupted' stopped after "
        f"{len(run.turns)} turns; the partial run is `thena_nb.last_run()` (and `exc.run` of "
        f"the interrupt)."
    ]
    assert "Traceback" not in shown and "_aio.py" not in shown
    shell.run_line_magic("unload_ext", "thena_nb")
    assert not shell.custom_exceptions  # unloading gives IPython its traceback back


def test_the_first_interrupt_installs_the_line_without_the_extension(
    shell: InteractiveShell,
) -> None:
    assert shell.run_cell(SETUP).success
    shown = one_line_shown(shell, KERNEL_CELL)
    run = thena_nb.last_run()
    assert run is not None and run.status == "stopped"
    assert [line for line in shown.splitlines() if line.strip()] == [
        f"KeyboardInterrupt: run {run.run_id!r} of workflow 'interrupted' stopped after "
        f"{len(run.turns)} turns; the partial run is `thena_nb.last_run()` (and `exc.run` of "
        f"the interrupt)."
    ]


def test_an_interrupt_without_a_run_keeps_ipythons_traceback(shell: InteractiveShell) -> None:
    assert install(shell)
    shown = one_line_shown(shell, "raise KeyboardInterrupt")
    assert "Traceback" in shown and "KeyboardInterrupt" in shown


def test_another_custom_handler_is_never_replaced(shell: InteractiveShell) -> None:
    def theirs(ip: object, etype: object, value: object, tb: object, tb_offset: object = None):
        print("their handler")

    shell.set_custom_exc((ValueError,), theirs)
    assert install(shell) is False
    assert shell.custom_exceptions == (ValueError,)
