"""The notebook layer: magics, the Stepper widget, turn frames and failure charts.

Importing this package loads none of IPython, ipywidgets, pandas or matplotlib: the magics
load when `%load_ext thena_nb` runs, `Stepper` on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

    from thena_nb.notebook.stepper import Stepper

__all__ = ["Stepper", "load_ipython_extension", "unload_ipython_extension"]


def load_ipython_extension(ip: InteractiveShell) -> None:
    """Register `%%thena_workflow`, `%thena_run` and `%thena_step` (`%load_ext thena_nb`).

    Args:
        ip: The running IPython shell.
    """
    from thena_nb.notebook import magics

    magics.load_ipython_extension(ip)


def unload_ipython_extension(ip: InteractiveShell) -> None:
    """Remove the magics again (`%unload_ext thena_nb`).

    Args:
        ip: The running IPython shell.
    """
    from thena_nb.notebook import magics

    magics.unload_ipython_extension(ip)


def __getattr__(name: str) -> Any:
    if name == "Stepper":
        from thena_nb.notebook.stepper import Stepper

        return Stepper
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
