"""The records every layer shares: turns, messages, tool calls, the model protocol, events,
the run report's nodes, errors, and decisions on gated calls. Records import nothing above them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from thena_nb.core.records._faces import lazy_face

if TYPE_CHECKING:
    from thena_nb.core.records.decisions import Approver as Approver
    from thena_nb.core.records.decisions import Decision as Decision
    from thena_nb.core.records.decisions import PendingCall as PendingCall
    from thena_nb.core.records.errors import ModelError as ModelError
    from thena_nb.core.records.errors import ScriptExhaustedError as ScriptExhaustedError
    from thena_nb.core.records.errors import StoreError as StoreError
    from thena_nb.core.records.errors import ThenaError as ThenaError
    from thena_nb.core.records.errors import TransientModelError as TransientModelError
    from thena_nb.core.records.errors import WorkflowDefinitionError as WorkflowDefinitionError
    from thena_nb.core.records.events import Event as Event
    from thena_nb.core.records.events import EventKind as EventKind
    from thena_nb.core.records.model import Model as Model
    from thena_nb.core.records.model import ModelRequest as ModelRequest
    from thena_nb.core.records.model import Reply as Reply
    from thena_nb.core.records.model import ToolSpec as ToolSpec
    from thena_nb.core.records.report import ReportNode as ReportNode
    from thena_nb.core.records.report import ReportNodeKind as ReportNodeKind
    from thena_nb.core.records.types import Budget as Budget
    from thena_nb.core.records.types import HistorySpan as HistorySpan
    from thena_nb.core.records.types import HistoryView as HistoryView
    from thena_nb.core.records.types import LoopFailure as LoopFailure
    from thena_nb.core.records.types import LoopStopReason as LoopStopReason
    from thena_nb.core.records.types import Message as Message
    from thena_nb.core.records.types import Messages as Messages
    from thena_nb.core.records.types import RetryPolicy as RetryPolicy
    from thena_nb.core.records.types import RunStatus as RunStatus
    from thena_nb.core.records.types import SentRequest as SentRequest
    from thena_nb.core.records.types import ToolCall as ToolCall
    from thena_nb.core.records.types import ToolCallSource as ToolCallSource
    from thena_nb.core.records.types import ToolDecision as ToolDecision
    from thena_nb.core.records.types import Turn as Turn
    from thena_nb.core.records.types import TurnInfo as TurnInfo
    from thena_nb.core.records.types import Usage as Usage

__all__ = [
    "Approver",
    "Budget",
    "Decision",
    "Event",
    "EventKind",
    "HistorySpan",
    "HistoryView",
    "LoopFailure",
    "LoopStopReason",
    "Message",
    "Messages",
    "Model",
    "ModelError",
    "ModelRequest",
    "PendingCall",
    "Reply",
    "ReportNode",
    "ReportNodeKind",
    "RetryPolicy",
    "RunStatus",
    "ScriptExhaustedError",
    "SentRequest",
    "StoreError",
    "ThenaError",
    "ToolCall",
    "ToolCallSource",
    "ToolDecision",
    "ToolSpec",
    "TransientModelError",
    "Turn",
    "TurnInfo",
    "Usage",
    "WorkflowDefinitionError",
]

_EXPORTS = {
    "Approver": "decisions",
    "Budget": "types",
    "Decision": "decisions",
    "Event": "events",
    "EventKind": "events",
    "HistorySpan": "types",
    "HistoryView": "types",
    "LoopFailure": "types",
    "LoopStopReason": "types",
    "Message": "types",
    "Messages": "types",
    "Model": "model",
    "ModelError": "errors",
    "ModelRequest": "model",
    "PendingCall": "decisions",
    "Reply": "model",
    "ReportNode": "report",
    "ReportNodeKind": "report",
    "RetryPolicy": "types",
    "RunStatus": "types",
    "ScriptExhaustedError": "errors",
    "SentRequest": "types",
    "StoreError": "errors",
    "ThenaError": "errors",
    "ToolCall": "types",
    "ToolCallSource": "types",
    "ToolDecision": "types",
    "ToolSpec": "model",
    "TransientModelError": "errors",
    "Turn": "types",
    "TurnInfo": "types",
    "Usage": "types",
    "WorkflowDefinitionError": "errors",
}

__getattr__, __dir__ = lazy_face(__name__, _EXPORTS)
