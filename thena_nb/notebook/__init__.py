"""The notebook layer: magics, the Stepper widget, turn frames, failure charts, run views.

Importing this package loads none of IPython, ipywidgets, pandas or matplotlib: each name is
imported from its module on first use (`load_ipython_extension` when `%load_ext thena_nb`
runs, `Stepper` when a stepper opens).

| module | holds |
| --- | --- |
| `magics` | `%%thena_workflow`, `%thena_run`, `%thena_step` and their cell parsing |
| `stepper` | the `Stepper` widget (one anywidget): its traits and public methods |
| `_stepper_controls` | the Stepper's parts, what each does, what goes to its front end |
| `_stepper_render` | the run drawn into the Stepper's parts |
| `_stepper_host` | the Stepper's actions, run one at a time on its event loop |
| `_stepper_events` | the session's events and what each turn leaves noted (breakpoints) |
| `_widget_parts` | the parts the Stepper's front end draws (`static/stepper.js`) |
| `_stepper_views` | what the Stepper shows, as functions of plain data |
| `_transcript` | the conversation, the turn inspector's tabs, the turn table (Stepper and page) |
| `_svg_chart` | the failure chart as inline SVG, themed by CSS |
| `_theme` | the one stylesheet, on JupyterLab's theme variables |
| `_stepper_gates` | the gate cards and the fork session of "Edit this turn and continue" |
| `_stepper_run` | `RecordedSession`: a recorded run read as the Stepper reads a session (view) |
| `_stepper_open` | `open_stepper`: the Stepper over a live session or a recorded run |
| `page` | a run as one self-contained HTML page (`run.to_html`) |
| `frames` | pandas DataFrames of turns |
| `charts` | the failure-streak Figure, and the one figure-to-PNG helper |
| `display` | a run's full HTML (`run_html`), as `Run._repr_html_` shows it |
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from thena_nb.notebook.magics import load_ipython_extension, unload_ipython_extension
    from thena_nb.notebook.stepper import Stepper

__all__ = ["Stepper", "load_ipython_extension", "unload_ipython_extension"]

_HOMES = {
    "Stepper": "thena_nb.notebook.stepper",
    "load_ipython_extension": "thena_nb.notebook.magics",
    "unload_ipython_extension": "thena_nb.notebook.magics",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
