"""The parts a workflow is built from: agents, tools, steps (`parallel`, `loop`), stop
conditions, history processors, the tool's context, and changes (variants of a workflow).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from thena_nb.core.records._faces import lazy_face

if TYPE_CHECKING:
    from thena_nb.core.parts.agent import Agent as Agent
    from thena_nb.core.parts.changes import Changes as Changes
    from thena_nb.core.parts.changes import grid as grid
    from thena_nb.core.parts.context import Context as Context
    from thena_nb.core.parts.history import HistoryProcessor as HistoryProcessor
    from thena_nb.core.parts.history import keep_first_and_recent as keep_first_and_recent
    from thena_nb.core.parts.plan import Plan as Plan
    from thena_nb.core.parts.steps import LoopStep as LoopStep
    from thena_nb.core.parts.steps import ParallelStep as ParallelStep
    from thena_nb.core.parts.steps import Step as Step
    from thena_nb.core.parts.steps import loop as loop
    from thena_nb.core.parts.steps import parallel as parallel
    from thena_nb.core.parts.stopping import Condition as Condition
    from thena_nb.core.parts.stopping import StopCondition as StopCondition
    from thena_nb.core.parts.stopping import called_tool as called_tool
    from thena_nb.core.parts.stopping import max_tool_calls as max_tool_calls
    from thena_nb.core.parts.stopping import stuck as stuck
    from thena_nb.core.parts.stopping import turn_of as turn_of
    from thena_nb.core.parts.stopping import until_answered as until_answered
    from thena_nb.core.parts.stopping import until_finish_reason as until_finish_reason
    from thena_nb.core.parts.stopping import until_text as until_text
    from thena_nb.core.parts.stopping import was_exhausted as was_exhausted
    from thena_nb.core.parts.tools import SchemaTool as SchemaTool
    from thena_nb.core.parts.tools import Stopped as Stopped
    from thena_nb.core.parts.tools import Tool as Tool
    from thena_nb.core.parts.tools import ToolSource as ToolSource
    from thena_nb.core.parts.tools import tool as tool

__all__ = [
    "Agent",
    "Changes",
    "Condition",
    "Context",
    "HistoryProcessor",
    "LoopStep",
    "ParallelStep",
    "Plan",
    "SchemaTool",
    "Step",
    "StopCondition",
    "Stopped",
    "Tool",
    "ToolSource",
    "called_tool",
    "grid",
    "keep_first_and_recent",
    "loop",
    "max_tool_calls",
    "parallel",
    "stuck",
    "tool",
    "turn_of",
    "until_answered",
    "until_finish_reason",
    "until_text",
    "was_exhausted",
]

_EXPORTS = {
    "Plan": "plan",
    "Agent": "agent",
    "Changes": "changes",
    "Condition": "stopping",
    "Context": "context",
    "HistoryProcessor": "history",
    "LoopStep": "steps",
    "ParallelStep": "steps",
    "SchemaTool": "tools",
    "Step": "steps",
    "StopCondition": "stopping",
    "Stopped": "tools",
    "Tool": "tools",
    "ToolSource": "tools",
    "called_tool": "stopping",
    "grid": "changes",
    "keep_first_and_recent": "history",
    "loop": "steps",
    "max_tool_calls": "stopping",
    "parallel": "steps",
    "stuck": "stopping",
    "tool": "tools",
    "turn_of": "stopping",
    "until_answered": "stopping",
    "until_finish_reason": "stopping",
    "until_text": "stopping",
    "was_exhausted": "stopping",
}

__getattr__, __dir__ = lazy_face(__name__, _EXPORTS)
