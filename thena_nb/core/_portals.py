"""The only imports in the core that run upward.

The core is the ground floor: it needs neither pandas, matplotlib, IPython nor ipywidgets,
and `import thena_nb` loads none of them, nor `sqlite3`, nor the rescue readers. A few core
methods hand work to a floor above (`run.frame()` to the notebook layer, `wf.map()` to
experiments, the default store to the SQLite store), and a turn whose text may hold a tool
call needs rescue. Each such hand-off is one small function here that imports what it needs
when it is first called, so the way up is in one place and nothing imports it at load time.
The only other imports inside core functions are the deferrals that keep `import thena_nb`
light (`DEFERRED` in `tests/test_layers.py`), and they stay within the core.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from thena_nb.core.records.errors import StoreError

if TYPE_CHECKING:
    import pandas as pd

    from thena_nb.core.engine.session import Session
    from thena_nb.core.parts.agent import Agent
    from thena_nb.core.parts.tools import Tool
    from thena_nb.core.records.model import Reply, ToolSpec
    from thena_nb.core.records.report import ReportNode
    from thena_nb.core.records.types import Turn
    from thena_nb.core.rescue import RescueScan
    from thena_nb.core.runs.run import Run
    from thena_nb.core.store.base import RunStore
    from thena_nb.experiments import Experiment
    from thena_nb.notebook.stepper import Stepper

# The hand-offs a run makes every turn (or every run), once imported: an `import` statement
# costs more than the rest of such a hand-off.
_scan: Callable[..., RescueScan] | None = None
_split: Callable[[str], tuple[str | None, str]] | None = None
_cost: Callable[[Any, Reply], float | None] | None = None
_store: Callable[[], RunStore | None] | None = None

__all__ = [
    "Experiment",
    "Stepper",
    "default_store",
    "diff_frame",
    "failure_chart",
    "foreign_step",
    "interrupted",
    "load_magics",
    "require_store",
    "run_experiment",
    "run_html",
    "run_page",
    "runs_frame",
    "scan_tool_calls",
    "schema_check",
    "split_reasoning",
    "stack_frames",
    "stepper",
    "turn_cost",
    "turn_frame",
]


def scan_tool_calls(text: str, tools: Sequence[Tool | ToolSpec], *, id_prefix: str) -> RescueScan:
    """A turn's rescue (`core.rescue`): its readers load with the first text that needs
    them."""
    global _scan
    if _scan is None:
        from thena_nb.core.rescue import scan_tool_calls as scan

        _scan = scan
    return _scan(text, tools, id_prefix=id_prefix)


def split_reasoning(text: str) -> tuple[str | None, str]:
    """A turn's reasoning apart from its answer, for text that is not searched for calls
    (`core._reasoning`, which loads without the rest of rescue)."""
    global _split
    if _split is None:
        from thena_nb.core.rescue._reasoning import split_reasoning as split

        _split = split
    return _split(text)


def interrupted() -> None:
    """A run was interrupted (a keyboard interrupt): under IPython, the shell shows it in one
    line naming where the partial run is (`thena_nb.notebook._interrupt`)."""
    from thena_nb.notebook._interrupt import install_in_running_shell

    install_in_running_shell()


def turn_cost(model: Any, reply: Reply) -> float | None:
    """A live turn's cost in US dollars, or `None` when its model has no known price
    (`thena_nb.cost`, which loads genai-prices with the first turn it prices)."""
    global _cost
    if _cost is None:
        from thena_nb.cost import turn_cost as cost

        _cost = cost
    return _cost(model, reply)


def turn_frame(turns: Sequence[Turn]) -> Any:
    """`run.frame()`: the turns as a pandas DataFrame (notebook layer)."""
    from thena_nb.notebook.frames import turn_frame as frame

    return frame(turns)


def stack_frames(runs: Sequence[Run]) -> pd.DataFrame:
    """`thena_nb.frames(runs)`: several runs' turn frames as one DataFrame (notebook layer)."""
    from thena_nb.notebook.frames import stack_frames as stack

    return stack(list(runs))


def runs_frame(rows: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """`thena_nb.runs()`: a store's runs as a DataFrame, one row per run (notebook layer)."""
    from thena_nb.notebook.frames import runs_frame as frame

    return frame(rows)


def load_magics(ipython: Any, *, load: bool = True) -> None:
    """`%load_ext thena_nb` (or `%unload_ext`, `load=False`): the magics (notebook layer)."""
    from thena_nb.notebook import magics

    if load:
        magics.load_ipython_extension(ipython)
    else:
        magics.unload_ipython_extension(ipython)


def diff_frame(rows: Sequence[Mapping[str, Any]]) -> Any:
    """`RunDiff.frame()`: the aligned pairs of two runs as a pandas DataFrame (notebook
    layer)."""
    from thena_nb.notebook.frames import diff_frame as frame

    return frame(rows)


def failure_chart(turns: Sequence[Turn], loops: Sequence[ReportNode]) -> Any:
    """`run.failure_chart()`: a matplotlib Figure (notebook layer)."""
    from thena_nb.notebook.charts import failure_chart as chart

    return chart(turns, loops)


def run_html(run: Run) -> str:
    """`Run._repr_html_`: with the turn table and the chart when pandas and matplotlib are
    there, the standard-library view otherwise (notebook layer)."""
    from thena_nb.notebook.display import run_html as html

    return html(run)


def run_page(run: Run, path: str | os.PathLike[str]) -> Path:
    """`run.to_html(path)`: the run as one self-contained HTML file (notebook layer)."""
    from thena_nb.notebook.page import write_run_page

    return write_run_page(run, path)


def stepper(run: Run | Session, *, workflow: Any = None, store: Any = None) -> Stepper:
    """`wf.stepper(input)`, `run.stepper()`, `thena_nb.stepper(run)`: the Stepper over a live
    session, or over a recorded run in view mode (notebook layer)."""
    from thena_nb.notebook._stepper_open import open_stepper

    return open_stepper(run, workflow=workflow, store=store)


def run_experiment(*args: Any, **kwargs: Any) -> Experiment:
    """`wf.map(...)`: an experiment over inputs and variants (the experiments package)."""
    from thena_nb.experiments import run_experiment as run

    return run(*args, **kwargs)


def foreign_step(agent: Any, *, name: str | None = None, gate: Any = None) -> Agent | None:
    """`agent` as a step when it is another framework's agent (`thena_nb.frameworks`), else
    `None`; the framework is imported only then."""
    from thena_nb.frameworks import step_of

    return step_of(agent, name=name, gate=gate)


def schema_check(name: str, schema: dict[str, Any]) -> Callable[[dict[str, Any]], None] | None:
    """A check of a call's arguments against a tool's JSON schema (`thena_nb._schema`, on
    `jsonschema`, which every framework extra installs); `None` without `jsonschema`, when
    whoever runs the tool checks them."""
    try:
        from thena_nb._schema import validator
    except ImportError:  # pragma: no cover - jsonschema comes with every framework extra
        return None
    return validator(name, schema)


def default_store() -> RunStore | None:
    """The default run store (its module loads `sqlite3`), or `None` when it is off."""
    global _store
    if _store is None:
        from thena_nb.store import default_store as store

        _store = store
    return _store()


def require_store(store: RunStore | None) -> RunStore:
    """`store`, or the default store when it is `None`.

    Raises:
        StoreError: There is no store: `THENA_NB_STORE` is off, or the default store's
            file could not be opened, and none was given.
    """
    found = store if store is not None else default_store()
    if found is None:
        from thena_nb.core.store._absent import why_none  # off, or a file that failed

        raise StoreError(
            f"there is no run store: {why_none()}. Pass `store=`, or point "
            "THENA_NB_STORE at a writable file."
        )
    return found
