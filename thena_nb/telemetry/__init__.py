"""OpenTelemetry traces of runs, in the GenAI semantic conventions (`pip install thena_nb[otel]`).

Nothing is traced, and no span is even created, until `instrument()` is called:

- `invoke_workflow {workflow}` (INTERNAL), one per run, `gen_ai.conversation.id` = run id;
- `thena.loop {step_path}` (INTERNAL), one per loop, with its stop reason and counters;
- `invoke_agent {agent}` (INTERNAL), one per turn, `thena.turn.replayed` on a replay;
- `chat {model}` (CLIENT), one per model attempt, retries included (none for a replayed
  turn: no call was made);
- `execute_tool {tool}` (INTERNAL), one per tool call that runs (none for a replayed turn's
  recorded results: the tool did not run again).

Names follow semantic-conventions `SEMCONV_VERSION` (the spans carry its schema URL).
Prompts, messages, tool arguments and results are recorded only with `capture_content=True`.

The other way: `runs_from_spans(spans)` and `load_otlp(path)` make runs of traces in the
GenAI conventions (thena_nb's own, pydantic-ai's, or any that follow them), to show, diff,
score, store and, when the spans hold the messages, replay (`Workflow.run(..., replay=run)`).

Example:
    >>> from opentelemetry.sdk.trace import TracerProvider
    >>> from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    >>> from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    ...     InMemorySpanExporter)
    >>> from thena_nb import Agent, Workflow, telemetry
    >>> from thena_nb.models import ScriptedModel
    >>> exporter = InMemorySpanExporter()
    >>> provider = TracerProvider()
    >>> provider.add_span_processor(SimpleSpanProcessor(exporter))
    >>> telemetry.instrument(provider)
    >>> run = Workflow("hello", [Agent("A", model=ScriptedModel(["hi"]))]).run("go", store=False)
    >>> telemetry.uninstrument()
    >>> [s.name for s in exporter.get_finished_spans()]
    ['chat scripted', 'invoke_agent A', 'invoke_workflow hello']
"""

from __future__ import annotations

try:
    from opentelemetry import trace
    from opentelemetry.trace import TracerProvider
except ModuleNotFoundError as missing:  # where the user asked for it, with what to install
    raise ImportError(
        "thena_nb.telemetry needs the OpenTelemetry API and SDK; install them with "
        "`pip install 'thena_nb[otel]'` (the `lab` extra has them too)"
    ) from missing

from thena_nb.core.engine import _observe
from thena_nb.telemetry._attributes import SCHEMA_URL, SEMCONV_VERSION
from thena_nb.telemetry._import import load_otlp, runs_from_spans
from thena_nb.telemetry._spans import SpanObserver

__all__ = [
    "SCHEMA_URL",
    "SEMCONV_VERSION",
    "instrument",
    "instrumented",
    "load_otlp",
    "runs_from_spans",
    "uninstrument",
]


def instrument(
    tracer_provider: TracerProvider | None = None, *, capture_content: bool = False
) -> None:
    """Trace every run from now on, to `tracer_provider` (the global one when `None`).

    Calling it again replaces the earlier instrumentation (its open spans are ended).

    Args:
        tracer_provider: Where spans go, e.g. an SDK `TracerProvider` with an exporter.
        capture_content: Also record the system prompt, the messages sent and received, and
            tool arguments and results. Off by default: they may hold private data.
    """
    if tracer_provider is not None and not hasattr(tracer_provider, "get_tracer"):
        raise TypeError(
            f"`tracer_provider` must be an OpenTelemetry TracerProvider, got "
            f"{type(tracer_provider).__name__}; e.g. opentelemetry.sdk.trace.TracerProvider()"
        )
    tracer = trace.get_tracer("thena_nb", tracer_provider=tracer_provider, schema_url=SCHEMA_URL)
    old = _observe.set_observer(SpanObserver(tracer, capture_content=capture_content))
    if isinstance(old, SpanObserver):
        old.close_all()


def uninstrument() -> None:
    """Stop tracing; spans still open are ended. Does nothing when not instrumented."""
    old = _observe.set_observer(None)
    if isinstance(old, SpanObserver):
        old.close_all()


def instrumented() -> bool:
    """Whether `instrument()` is in effect.

    >>> instrumented()
    False
    """
    return isinstance(_observe.observer, SpanObserver)
