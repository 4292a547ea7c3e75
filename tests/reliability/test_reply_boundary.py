"""The model boundary (`core/engine/_reply_check.py`, checked in the model phase of `core/engine/_turn.py`):
what a live model call returns must be a `Reply` whose token counts are whole numbers from 0
to 2**63 - 1 (`Reply` refuses any other when it is made), else the turn fails with a clear
error naming the model, the agent and the turn, before the reply touches the run's usage,
its frame or its store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from thena_nb import Agent, Budget, ModelError, Workflow, loop, telemetry, tool, until_answered
from thena_nb.core.engine._reply_check import reply_error
from thena_nb.models import ModelRequest, Reply, reply
from thena_nb.store import SqliteRunStore

pytestmark = pytest.mark.anyio


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


class Custom:
    """A hand-written model: a tool call first, then whatever `second` is (or makes, when it
    is a function: a `Reply` it fails to make fails inside `respond`)."""

    name = "custom"

    def __init__(self, second: Any) -> None:
        self.second = second
        self.calls = 0

    async def respond(self, request: ModelRequest) -> Any:
        self.calls += 1
        if self.calls % 2 == 1:
            return reply.tool("add", a=2, b=3, input_tokens=7, output_tokens=1)
        return self.second() if callable(self.second) else self.second


def _workflow(second: Any, **options: Any) -> Workflow:
    agent = Agent("Calc", model=Custom(second), tools=[add], rescue=False)
    steps = [loop(steps=[agent], until=until_answered, max_iterations=3)]
    return Workflow("boundary", steps, **options)


async def _fails(second: Any, error: type[Exception], **options: Any) -> tuple[Exception, Any]:
    with pytest.raises(error) as info:
        await _workflow(second, **options).arun("2 + 3?", store=False)
    exc = info.value
    run = exc.run  # type: ignore[attr-defined]
    assert run.status == "failed" and len(run.turns) == 1
    assert any("in turn 1 of agent 'Calc'" in note for note in exc.__notes__)
    return exc, run


@pytest.mark.parametrize("second", ["5", None, {"text": "5"}], ids=["str", "None", "dict"])
async def test_a_custom_model_returning_no_reply_is_a_type_error_naming_model_and_turn(
    second: Any,
) -> None:
    exc, run = await _fails(second, TypeError)
    message = str(exc)
    assert message.startswith("turn 1 of agent 'Calc': model 'custom' returned a ")
    assert f"({second!r}), not a `Reply`" in message and "reply.text(...)" in message
    assert run.error == f"TypeError: {message}"
    assert "input_tokens" not in message  # not the AttributeError of old


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("input_tokens", -10_000),
        ("output_tokens", -1),
        ("cache_read_tokens", 10**30),
        ("cache_write_tokens", 2**63),
        ("reasoning_tokens", -5),
    ],
)
async def test_an_impossible_token_count_is_a_model_error_naming_model_and_turn(
    field: str, value: int
) -> None:
    exc, run = await _fails(lambda: Reply(text="5", **{field: value}), ModelError)
    assert str(exc).startswith(f"turn 1 of agent 'Calc': model 'custom' reported {field}={value}:")
    assert "from 0 to 2**63 - 1" in str(exc)
    assert exc.model_name == "custom"  # type: ignore[attr-defined]
    assert run.usage.input_tokens == 7 and run.usage.output_tokens == 1  # never counted
    assert len(run.frame()) == 1  # no OverflowError
    assert type(exc.__cause__).__name__ == "ValidationError"  # what Reply said, kept


async def test_the_largest_count_that_fits_is_accepted_and_stored(tmp_path: Path) -> None:
    store = SqliteRunStore(tmp_path / "runs.db")
    try:
        run = await _workflow(Reply(text="5", output_tokens=2**63 - 1)).arun("2 + 3?", store=store)
        stored = store.load(run.run_id)
    finally:
        store.close()
    assert run.status == "finished" and stored.turns[-1].output_tokens == 2**63 - 1
    assert len(run.frame()) == 2


async def test_a_negative_count_can_no_longer_keep_a_budget_from_stopping() -> None:
    """-10,000 tokens a turn used to drive the usage down so that `Budget` never stopped."""
    budget = Budget(max_tokens=100)
    await _fails(lambda: Reply(text="5", input_tokens=-10_000), ModelError, budget=budget)


async def test_counts_that_are_no_whole_numbers_are_a_model_error() -> None:
    exc, _ = await _fails(lambda: Reply(text="5", input_tokens=1.5), ModelError)
    assert "model 'custom' reported input_tokens=1.5" in str(exc)


async def test_a_subclass_built_without_validation_is_still_checked() -> None:
    class Tagged(Reply):
        pass

    built = Tagged.model_construct(text="5", output_tokens=-2)  # skips Reply's validation
    exc, _ = await _fails(built, ModelError)
    assert str(exc).startswith("turn 1 of agent 'Calc': model 'custom' reported output_tokens=-2")


async def test_a_sound_subclass_of_reply_passes_the_boundary() -> None:
    class Tagged(Reply):
        pass

    run = await _workflow(Tagged(text="5", input_tokens=3)).arun("2 + 3?", store=False)
    assert run.status == "finished" and run.usage.input_tokens == 10


def test_the_whole_range_of_counts_and_nothing_else_is_a_reply() -> None:
    assert reply_error(Reply(input_tokens=2**63 - 1), model="m", where="w") is None
    for bad in (-1, 2**63, 1.5, "many"):
        with pytest.raises(ValueError):
            Reply(output_tokens=bad)
    assert isinstance(reply_error("text", model="m", where="w"), TypeError)
    assert isinstance(reply_error(None, model="m", where="w"), TypeError)


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry.instrument(provider)
    yield exporter
    telemetry.uninstrument()


async def test_with_telemetry_a_bad_reply_fails_its_chat_span_and_the_same_error_is_raised(
    spans: InMemorySpanExporter,
) -> None:
    exc, _ = await _fails("5", TypeError)
    assert str(exc).startswith("turn 1 of agent 'Calc': model 'custom' returned a str")
    chats = [s for s in spans.get_finished_spans() if s.name.startswith("chat ")]
    assert len(chats) == 2
    assert chats[-1].attributes is not None and chats[-1].attributes["error.type"] == "TypeError"
