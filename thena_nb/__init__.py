"""thena_nb: build, run and step through LLM agent workflows in Jupyter.

Example:
    >>> from thena_nb import Agent, Workflow, loop, until_answered
    >>> from thena_nb.models import ScriptedModel
    >>> agent = Agent("Executor", model=ScriptedModel(["All done."]))
    >>> Workflow("demo", [loop(steps=[agent], until=until_answered)]).run("go").output
    'All done.'
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from thena_nb.core import _portals
from thena_nb.core.parts.agent import Agent
from thena_nb.core.parts.changes import grid
from thena_nb.core.parts.context import Context
from thena_nb.core.parts.history import keep_first_and_recent
from thena_nb.core.parts.steps import (
    DEFAULT_MAX_FAILS,
    DEFAULT_MAX_ITERATIONS,
    LoopStep,
    ParallelStep,
    loop,
    parallel,
)
from thena_nb.core.parts.stopping import (
    called_tool,
    max_tool_calls,
    stuck,
    turn_of,
    until_answered,
    until_finish_reason,
    until_text,
    was_exhausted,
)
from thena_nb.core.parts.tools import tool
from thena_nb.core.records.errors import ModelError, ThenaError, WorkflowDefinitionError
from thena_nb.core.records.types import (
    Budget,
    LoopFailure,
    LoopStopReason,
    Message,
    ToolCall,
    Turn,
    TurnInfo,
    Usage,
)
from thena_nb.core.workflow import Workflow

if TYPE_CHECKING:
    import pandas as pd
    from IPython.core.interactiveshell import InteractiveShell

    from thena_nb.core.engine.gates import GateError
    from thena_nb.core.engine.session import Session
    from thena_nb.core.records.decisions import Decision, PendingCall
    from thena_nb.core.records.events import Event
    from thena_nb.core.records.report import ReportNode
    from thena_nb.core.runs.run import Run, last_run
    from thena_nb.experiments.cases import Case
    from thena_nb.frameworks.record import record

_LAZY = {
    "Case": "thena_nb.experiments.cases",
    "Decision": "thena_nb.core.records.decisions",
    "Event": "thena_nb.core.records.events",
    "GateError": "thena_nb.core.engine.gates",
    "PendingCall": "thena_nb.core.records.decisions",
    "ReportNode": "thena_nb.core.records.report",
    "Run": "thena_nb.core.runs.run",
    "Session": "thena_nb.core.engine.session",
    "last_run": "thena_nb.core.runs.run",
    "record": "thena_nb.frameworks.record",
}
"""The public names not needed to define a workflow, by the module that holds each: they
load when first used (`thena_nb.Session`, `from thena_nb import Run`), so `import thena_nb`
loads neither the machinery that runs a workflow (asyncio among it) nor gates, events and
reports."""

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_MAX_FAILS",
    "DEFAULT_MAX_ITERATIONS",
    "Agent",
    "Budget",
    "Case",
    "Context",
    "Decision",
    "Event",
    "GateError",
    "LoopFailure",
    "LoopStep",
    "LoopStopReason",
    "Message",
    "ModelError",
    "ParallelStep",
    "PendingCall",
    "ReportNode",
    "Run",
    "Session",
    "ThenaError",
    "ToolCall",
    "Turn",
    "TurnInfo",
    "Usage",
    "Workflow",
    "WorkflowDefinitionError",
    "called_tool",
    "frames",
    "grid",
    "keep_first_and_recent",
    "last_run",
    "loop",
    "max_tool_calls",
    "parallel",
    "record",
    "runs",
    "stepper",
    "stuck",
    "tool",
    "turn_of",
    "until_answered",
    "until_finish_reason",
    "until_text",
    "was_exhausted",
]


def __getattr__(name: str) -> Any:
    """A name of `_LAZY`, imported on first use and kept (PEP 562)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'thena_nb' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


def frames(runs: Any) -> pd.DataFrame:
    """Stack several runs' turn frames into one DataFrame with a leading `run_id` column.

    Example:
        >>> from thena_nb import Agent, Workflow, frames
        >>> from thena_nb.models import ScriptedModel
        >>> wf = Workflow("hi", [Agent("A", model=ScriptedModel(["hello"]))])
        >>> frames([wf.run("x"), wf.run("y")]).shape[0]
        2
    """
    return _portals.stack_frames(list(runs))


def runs(*, store: Any = None) -> pd.DataFrame:
    """The stored runs as a pandas DataFrame, one row per run, in the order they started.

    Columns: `run_id`, `workflow`, `input`, `status`, `stop_reasons` (a dict of loop path to
    stop reason), `turns`, `input_tokens`, `output_tokens`, `started_at` (UTC), and for a
    fork or a continuation, `parent_run_id` (the run it came from) and `forked_at` (the turn
    it went live from), missing (`<NA>`) for any other run.

    Args:
        store: The store to list; the default store when not given.

    Raises:
        StoreError: There is no store (`THENA_NB_STORE` is off and none was given).
    """
    return _portals.runs_frame(_portals.require_store(store).list_runs())


def load_ipython_extension(ipython: InteractiveShell) -> None:
    """`%load_ext thena_nb`: register the `%%thena_workflow`, `%thena_run`, `%thena_step` magics."""
    _portals.load_magics(ipython)


def unload_ipython_extension(ipython: InteractiveShell) -> None:
    """`%unload_ext thena_nb`."""
    _portals.load_magics(ipython, load=False)


def stepper(run: Run | Session, *, workflow: Any = None, store: Any = None) -> _portals.Stepper:
    """Open the Stepper on any run, in view mode: scrub its turns, inspect each one (what the
    model was sent, reasoning, tool calls), read the turn table and the failure chart, ask
    what-if, and fork it from the shown turn into a live session.

    The controls that need a live session (Step, Run, Pause, Stop, the gate cards, the
    breakpoints) are hidden; a status line says what is shown. "Fork from here" starts a
    live session that reuses the turns before the shown one and runs it onward live (as
    `run.fork(at)`), and the Stepper follows it; "Back to the parent run" returns to the view.
    It needs the run's workflow: `workflow=`, or the one the run knows (`run.workflow`, set on
    a run made in this process); without either it is disabled, and its tooltip says so.

    Args:
        run: The run: stored (`Run.load`), a fork, read with `Run.from_json`, imported, or
            of another framework's agent. A live `Session` opens the live Stepper instead.
        workflow: The workflow to fork with: a `Workflow`, or the agent it was made of (a
            thena_nb `Agent`, a pydantic-ai or OpenAI Agents SDK agent), made a one-step
            workflow named as the run's. By default the run's own `run.workflow`.
        store: Where a fork is kept: a run store, `False` for none, or `None` for the
            default store.

    Returns:
        The `Stepper` (`display` it, or end a cell with it).

    Raises:
        TypeError: `run` is not a `Run`, or `workflow` is neither a workflow nor an agent.

    Example:
        >>> from thena_nb import Agent, Workflow
        >>> from thena_nb.models import ScriptedModel
        >>> run = Workflow("hi", [Agent("A", model=ScriptedModel(["hello"]))]).run(
        ...     "go", store=False)
        >>> from thena_nb import stepper
        >>> viewed = stepper(run)
        >>> viewed.mode, viewed.status, viewed.turn_count, viewed.fork_button.disabled
        ('view', 'finished', 1, False)
    """
    return _portals.stepper(run, workflow=workflow, store=store)
