"""The public names are exactly the lists of docs/design.md."""

from __future__ import annotations

import thena_nb
import thena_nb.models
import thena_nb.rescue

CORE = {
    "Agent", "tool", "Workflow", "Context", "Run", "Session", "Budget",
    "parallel", "loop", "ParallelStep", "LoopStep",
    "until_answered", "called_tool", "turn_of", "was_exhausted",
    "max_tool_calls", "until_finish_reason", "until_text", "stuck", "keep_first_and_recent",
    "DEFAULT_MAX_ITERATIONS", "DEFAULT_MAX_FAILS",
    "TurnInfo", "Turn", "ToolCall", "Message", "LoopFailure", "LoopStopReason",
    "ThenaError", "WorkflowDefinitionError", "ModelError", "Usage", "ReportNode", "Event",
}  # fmt: skip
LATER = {
    "frames", "runs", "grid", "Case", "Decision", "PendingCall", "GateError", "last_run",
    "record", "stepper",
}  # fmt: skip
MODELS = {
    "ScriptedModel", "FunctionModel", "AnthropicModel", "OpenAICompatModel", "reply", "Model",
    "ModelRequest", "ToolSpec", "Reply", "RetryPolicy", "TransientModelError", "ModelError",
}  # fmt: skip


def test_thena_nb_all() -> None:
    exported = set(thena_nb.__all__)
    assert exported >= CORE
    assert exported - CORE <= LATER
    for name in thena_nb.__all__:
        assert hasattr(thena_nb, name), name


def test_models_all() -> None:
    assert set(thena_nb.models.__all__) == MODELS
    for name in MODELS:
        assert getattr(thena_nb.models, name) is not None


def test_scorers_all() -> None:
    import thena_nb.scorers

    assert set(thena_nb.scorers.__all__) == {
        "Score", "Scorer", "Check", "Judge", "equals", "contains", "matches", "stop_reason",
        "tool_trajectory", "max_turns", "no_failed_tools", "judge",
    }  # fmt: skip
    for name in thena_nb.scorers.__all__:
        assert getattr(thena_nb.scorers, name) is not None


def test_rescue_all() -> None:
    assert thena_nb.rescue.__all__ == ["rescue_tool_calls"]


def test_telemetry_all() -> None:
    import thena_nb.telemetry

    assert set(thena_nb.telemetry.__all__) == {
        "SCHEMA_URL", "SEMCONV_VERSION", "instrument", "instrumented", "uninstrument",
        "runs_from_spans", "load_otlp",
    }  # fmt: skip


def test_defaults() -> None:
    assert (thena_nb.DEFAULT_MAX_ITERATIONS, thena_nb.DEFAULT_MAX_FAILS) == (10, 5)


def test_store_contract_all() -> None:
    """The shipped store contract suite: `from thena_nb.store_contract import *` takes in
    exactly its tests, every one of them."""
    import thena_nb.store_contract as contract

    assert set(contract.__all__) == {
        "test_a_failed_run_keeps_its_turns_and_error",
        "test_a_finished_run_round_trips",
        "test_a_resumed_waiting_run_is_stored_with_no_pending_calls",
        "test_a_run_that_never_finished_is_rebuilt_from_its_turns",
        "test_a_stored_run_id_given_again_is_refused_and_the_stored_run_kept",
        "test_a_waiting_runs_pending_calls_round_trip",
        "test_branch_messages_not_yet_stored_are_rebuilt",
        "test_every_load_is_a_fresh_copy",
        "test_runs_are_listed_in_the_order_they_started",
        "test_s28_a_turn_is_stored_before_the_next_starts",
        "test_the_same_run_id_again_replaces_the_stale_turns",
        "test_turns_are_stored_in_index_order",
        "test_unknown_runs_and_delete",
        "test_what_each_model_was_sent_loads_with_its_turn",
    }
    assert set(contract.__all__) == {n for n in vars(contract) if n.startswith("test_")}


def test_store_all() -> None:
    import thena_nb.store

    assert set(thena_nb.store.__all__) == {
        "ABANDONED",
        "APPLICATION_ID",
        "ENV_VAR",
        "RunInUse",
        "RunRecorder",
        "TurnRecord",
        "records_of",
        "MemoryRunStore",
        "RunStore",
        "SqliteRunStore",
        "StoreError",
        "default_store",
        "default_store_path",
    }


CORE_FACES = {
    "thena_nb.core.records": {
        "Budget", "HistorySpan", "HistoryView", "LoopFailure", "LoopStopReason", "Message",
        "Messages", "RetryPolicy", "RunStatus", "SentRequest", "ToolCall", "ToolCallSource",
        "ToolDecision", "Turn", "TurnInfo", "Usage", "Model", "ModelRequest", "Reply", "ToolSpec",
        "Event", "EventKind", "ReportNode", "ReportNodeKind", "ModelError",
        "ScriptExhaustedError", "StoreError", "ThenaError", "TransientModelError",
        "WorkflowDefinitionError", "Approver", "Decision", "PendingCall",
    },
    "thena_nb.core.parts": {
        "Agent", "SchemaTool", "Stopped", "Tool", "ToolSource", "tool", "LoopStep",
        "ParallelStep", "Step", "loop", "parallel", "Condition", "StopCondition", "called_tool",
        "max_tool_calls", "stuck", "turn_of", "until_answered", "until_finish_reason",
        "until_text", "was_exhausted", "HistoryProcessor", "keep_first_and_recent", "Context",
        "Changes", "grid", "Plan",
    },
    "thena_nb.core.runs": {
        "Run", "current_run", "current_run_id", "last_run", "Divergence", "DivergenceCause",
        "PairDifference", "RunDiff", "TurnPair", "RecordedContext", "WhatIf", "what_if",
        "RunView",
    },
    "thena_nb.core.engine": {
        "Breakpoint", "OpenLoop", "Session", "GateError", "Gatekeeper", "ForeignAgent",
        "ForeignRequest", "TurnPort",
    },
    "thena_nb.core.rescue": {
        "MAX_CALLS", "RescueScan", "rescue_tool_calls", "scan_tool_calls", "split_reasoning",
    },
}  # fmt: skip


def test_core_faces_all() -> None:
    """Each floor of the core has a face: exactly these names, each served (lazily) by it."""
    import importlib

    for face, names in CORE_FACES.items():
        module = importlib.import_module(face)
        assert set(module.__all__) == names, face
        for name in names:
            assert getattr(module, name) is not None, f"{face}.{name}"
        assert set(dir(module)) >= names
