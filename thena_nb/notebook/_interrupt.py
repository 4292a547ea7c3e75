"""A kernel interrupt during a run, as a notebook shows it: one short line that names where
the partial run is, instead of the traceback through the event-loop machinery.

`install(shell)` makes it the IPython shell's handler of `KeyboardInterrupt`: loading the
extension does that (`%load_ext thena_nb`), and so does the first interrupt of a run in a
shell that has no handler of its own. An interrupt that carries no run (one outside
thena_nb) gets IPython's usual traceback.
"""

from __future__ import annotations

import sys
from types import TracebackType
from typing import Any

__all__ = ["install", "install_in_running_shell", "interrupt_line", "uninstall"]

_MARK = "_thena_nb_interrupts"
"""Holds, on a shell, the handler `install` gave it (ours while it is the shell's)."""


def interrupt_line(run: Any) -> str:
    """The one line an interrupted run is shown as.

    Example:
        >>> from thena_nb import Run
        >>> run = Run(workflow_name="review", input="x", run_id="r1")
        >>> interrupt_line(run)  # doctest: +NORMALIZE_WHITESPACE
        "KeyboardInterrupt: run 'r1' of workflow 'review' stopped after 0 turns; the partial
        run is `thena_nb.last_run()` (and `exc.run` of the interrupt)."
    """
    turns = len(run.turns)
    counted = f"{turns} turn" if turns == 1 else f"{turns} turns"
    return (
        f"KeyboardInterrupt: run {run.run_id!r} of workflow {run.workflow_name!r} stopped "
        f"after {counted}; the partial run is `thena_nb.last_run()` (and `exc.run` of the "
        f"interrupt)."
    )


def install(shell: Any) -> bool:
    """Make `shell` show an interrupted run in one line; `False` (and nothing changed) when
    the shell has a custom exception handler of someone else's."""
    if _ours(shell):
        return True
    if getattr(shell, "custom_exceptions", ()):
        return False  # one handler per shell: never replace another's
    shell.set_custom_exc((KeyboardInterrupt,), _show)
    setattr(shell, _MARK, shell.CustomTB)
    return True


def uninstall(shell: Any) -> None:
    """Give `shell` back IPython's own interrupt traceback, if the handler is ours."""
    if _ours(shell):
        shell.set_custom_exc((), None)
    if hasattr(shell, _MARK):
        delattr(shell, _MARK)


def _ours(shell: Any) -> bool:
    mine = getattr(shell, _MARK, None)
    return mine is not None and mine is getattr(shell, "CustomTB", None)


def install_in_running_shell() -> None:
    """`install` into the IPython shell this process runs, if any (IPython is never
    imported here: a process that has not loaded it has no shell)."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return
    shell = ipython.get_ipython()
    if shell is not None:
        install(shell)


def _show(
    shell: Any,
    etype: type[BaseException],
    value: BaseException,
    tb: TracebackType | None,
    tb_offset: int | None = None,
) -> None:
    run = getattr(value, "run", None)
    if run is None or not hasattr(run, "turns"):
        shell.showtraceback((etype, value, tb), tb_offset=tb_offset)
        return
    print(interrupt_line(run), file=sys.stderr)  # the cell still ends in error (error_in_exec)
