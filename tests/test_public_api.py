"""The public names are exactly DESIGN.md's lists."""

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
