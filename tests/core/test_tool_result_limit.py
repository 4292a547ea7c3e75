"""Huge tool results (`Workflow(max_tool_result_chars=...)`): a result past the limit keeps
its head and tail around a note, before it is kept and sent to the model, and its call says
how much was cut (`ToolCall.result_cut`); terminal escape sequences in results and errors show
as text in every HTML view, never raw."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest

from thena_nb import Agent, Run, Workflow, loop, tool, until_answered
from thena_nb.core.parts._tool_size import DEFAULT_MAX_TOOL_RESULT_CHARS, cut_middle
from thena_nb.core.parts.changes import apply_changes
from thena_nb.core.parts.tools import run_tool_call
from thena_nb.core.records.errors import WorkflowDefinitionError
from thena_nb.core.records.model import ModelRequest
from thena_nb.core.records.types import ToolCall
from thena_nb.models import FunctionModel, ScriptedModel, reply
from thena_nb.notebook import _transcript
from thena_nb.notebook.page import run_page_html
from thena_nb.store import SqliteRunStore

pytestmark = pytest.mark.anyio

FIVE_MB = 5_000_000
RAW_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
"""What no HTML view may emit: control characters other than tab, newline and return."""


@tool
def dump(size: int) -> str:
    """A result of `size` characters: HEAD, x's, TAIL."""
    return "HEAD" + "x" * (size - 8) + "TAIL"


def dumping(model: Any, **options: Any) -> Workflow:
    agent = Agent("A", model=model, tools=[dump])
    return Workflow("w", [loop(steps=[agent], until=until_answered)], **options)


def recording(seen: list[ModelRequest]) -> FunctionModel:
    """A model that asks for 5 MB once, then answers, keeping every request it received."""

    def answer(request: ModelRequest) -> Any:
        seen.append(request)
        if len(seen) == 1:
            return reply.tool("dump", size=FIVE_MB)
        return "done"

    return FunctionModel(answer)


def note(cut: int, size: int, limit: int) -> str:
    return f"\n…[thena_nb cut {cut:,} of {size:,} characters: max_tool_result_chars={limit}]…\n"


async def test_a_5_mb_result_keeps_its_head_and_tail_around_a_note_and_the_model_gets_that() -> (
    None
):
    seen: list[ModelRequest] = []
    run = await dumping(recording(seen), max_tool_result_chars=1000).arun("go", store=False)
    (call,) = run.turns[0].tool_calls
    cut = FIVE_MB - 1000
    assert call.ok is True and call.result_cut == cut
    assert call.result == "HEAD" + "x" * 496 + note(cut, FIVE_MB, 1000) + "x" * 496 + "TAIL"
    assert "4,999,000 of 5,000,000 characters" in call.result
    # What the model was sent next, and what the run's history keeps, is the cut text.
    told = next(m for m in seen[1].messages if m.role == "tool")
    assert told.content == call.result
    kept = next(m for m in run.history if m.role == "tool")
    assert kept.content == call.result
    assert run.output == "done"


async def test_the_default_limit_applies_without_asking() -> None:
    seen: list[ModelRequest] = []
    wf = dumping(recording(seen))
    assert wf.max_tool_result_chars == DEFAULT_MAX_TOOL_RESULT_CHARS == 100_000
    run = await wf.arun("go", store=False)
    call = run.turns[0].tool_calls[0]
    assert call.result_cut == FIVE_MB - 100_000
    assert call.result is not None and len(call.result) < 100_200
    assert call.result.startswith("HEAD") and call.result.endswith("TAIL")


async def test_none_keeps_every_character() -> None:
    seen: list[ModelRequest] = []
    run = await dumping(recording(seen), max_tool_result_chars=None).arun("go", store=False)
    call = run.turns[0].tool_calls[0]
    assert call.result_cut is None and call.result is not None and len(call.result) == FIVE_MB
    told = next(m for m in seen[1].messages if m.role == "tool")
    assert len(told.content) == FIVE_MB


async def test_a_result_within_the_limit_is_untouched() -> None:
    model = ScriptedModel([reply.tool("dump", size=1000), "done"])
    run = await dumping(model, max_tool_result_chars=1000).arun("go", store=False)
    call = run.turns[0].tool_calls[0]
    assert call.result_cut is None and call.result == "HEAD" + "x" * 992 + "TAIL"


async def test_a_huge_error_is_cut_too_and_so_is_its_traceback() -> None:
    @tool
    def explode() -> str:
        """Raises with a huge message."""
        raise ValueError("E" * 50_000)

    agent = Agent("A", model=ScriptedModel([reply.tool("explode"), "ok"]), tools=[explode])
    wf = Workflow("w", [loop(steps=[agent], until=until_answered)], max_tool_result_chars=2000)
    call = (await wf.arun("go", store=False)).turns[0].tool_calls[0]
    assert call.ok is False and call.error is not None
    assert call.error.startswith("Error: tool 'explode' {} raised ValueError: EEE")
    assert call.result_cut == len("Error: tool 'explode' {} raised ValueError: ") + 50_000 - 2000
    assert "max_tool_result_chars=2000" in call.error
    assert call.traceback is not None and "max_tool_result_chars=2000" in call.traceback


async def test_cutting_takes_linear_time() -> None:
    """50 MB is cut in well under a second (a quadratic cut would take minutes)."""
    big = "y" * 50_000_000
    t0 = time.perf_counter()
    text, cut = cut_middle(big, 100_000)
    assert time.perf_counter() - t0 < 1.0
    assert cut == 49_900_000 and text.startswith("y" * 50_000) and text.endswith("y" * 50_000)


def test_cut_middle_keeps_head_and_tail_for_any_limit() -> None:
    assert cut_middle("abc", None) == ("abc", None)
    assert cut_middle("abc", 3) == ("abc", None)
    assert cut_middle("abcdef", 1)[0].startswith("a\n…[thena_nb cut 5 of 6")
    assert cut_middle("abcdef", 1)[0].endswith("]…\n")  # no tail for a limit of 1
    assert cut_middle("abcdef", 2) == ("a" + note(4, 6, 2) + "f", 4)


async def test_run_tool_call_cuts_in_one_place() -> None:
    call = ToolCall(id="1", name="dump", arguments={"size": 100})
    done = await run_tool_call(call, {"dump": dump}, None, max_chars=10)
    assert done.result == "HEADx" + note(90, 100, 10) + "xTAIL" and done.result_cut == 90
    unknown = await run_tool_call(ToolCall(id="2", name="nope"), {"dump": dump}, None, max_chars=10)
    assert unknown.result_cut is not None and unknown.error is not None  # the error, cut


@pytest.mark.parametrize("bad", [0, -1, 2.5, "100", True])
def test_a_bad_limit_is_refused_with_a_clear_error(bad: object) -> None:
    with pytest.raises(
        WorkflowDefinitionError,
        match=r"workflow 'w': `max_tool_result_chars` must be a positive whole number",
    ):
        Workflow("w", [], max_tool_result_chars=bad)  # type: ignore[arg-type]


def test_the_limit_is_a_changeable_workflow_field() -> None:
    wf = Workflow("w", [Agent("A", model=ScriptedModel(["hi"]))], max_tool_result_chars=500)
    assert apply_changes(wf, {}).max_tool_result_chars == 500
    assert apply_changes(wf, {"w": {"max_tool_result_chars": None}}).max_tool_result_chars is None


async def test_a_cut_call_is_stored_and_read_back_with_its_mark(tmp_path: Path) -> None:
    seen: list[ModelRequest] = []
    with SqliteRunStore.from_path(tmp_path / "runs.sqlite3") as store:
        run = await dumping(recording(seen), max_tool_result_chars=1000).arun("go", store=store)
        loaded = Run.load(run.run_id, store=store)
    call = loaded.turns[0].tool_calls[0]
    assert call.result_cut == FIVE_MB - 1000 and call.result == run.turns[0].tool_calls[0].result
    told = next(m for m in loaded.history if m.role == "tool")
    assert told.content == call.result


def test_a_call_stored_before_result_cut_existed_reads_as_not_cut() -> None:
    old = {"id": "1", "name": "dump", "arguments": {}, "ok": True, "result": "r", "retries": 0}
    assert ToolCall.model_validate(old).result_cut is None


# -- the views ---------------------------------------------------------------------------


async def test_the_page_and_the_stepper_views_mark_a_cut_call() -> None:
    seen: list[ModelRequest] = []
    run = await dumping(recording(seen), max_tool_result_chars=1000).arun("go", store=False)
    marker = f"cut: {FIVE_MB - 1000:,} characters"
    turn = run.turns[0]
    assert marker in _transcript.tools_html(turn)  # the Stepper's Tools tab
    assert marker in _transcript.transcript_html(run)  # the Stepper's conversation
    assert marker in turn._repr_html_()  # the turn's card (Stepper and notebook)
    assert run_page_html(run).count(marker) >= 3  # the page: transcript, reply, tools


ANSI = "\x1b[31mred\x1b[0m and a bell\x07"


@tool
def colourful() -> str:
    """A result with terminal colour codes."""
    return ANSI


@tool
def colourful_failure() -> str:
    """An error with terminal colour codes."""
    raise RuntimeError(ANSI)


async def coloured_run() -> Run:
    model = ScriptedModel(
        [reply.calls([("colourful", {}), ("colourful_failure", {})], text=ANSI), "done"]
    )
    agent = Agent("A", model=model, tools=[colourful, colourful_failure])
    return await Workflow("w", [loop(steps=[agent], until=until_answered)]).arun(
        "go \x1b[1m", store=False
    )


async def test_terminal_escapes_show_as_text_on_the_page() -> None:
    run = await coloured_run()
    assert run.turns[0].tool_calls[0].result == ANSI  # the record keeps them as they were
    page = run_page_html(run)
    assert RAW_CONTROL.search(page) is None
    assert "␛[31mred␛[0m and a bell␇" in page


async def test_terminal_escapes_show_as_text_in_the_stepper() -> None:
    """The Stepper's views (its conversation, turn card, inspector tabs), and the run's."""
    run = await coloured_run()
    turn = run.turns[0]
    for html in (
        _transcript.tools_html(turn),
        _transcript.transcript_html(run),
        turn._repr_html_(),
        _transcript.saw_html(run, run.turns[1]),
        run._repr_html_(),
    ):
        assert RAW_CONTROL.search(html) is None
        assert "␛[31mred␛[0m" in html


async def test_terminal_escapes_show_as_text_in_a_live_stepper_widget() -> None:
    model = ScriptedModel([reply.calls([("colourful", {}), ("colourful_failure", {})]), "done"])
    agent = Agent("A", model=model, tools=[colourful, colourful_failure])
    stepper = Workflow("w", [loop(steps=[agent], until=until_answered)]).stepper("go")
    await stepper.step()
    stepper.inspector.selected_index = _transcript.INSPECTOR_TABS.index("Tools")
    for widget in (stepper.turn_html, stepper.transcript_html, stepper.tools_html):
        assert RAW_CONTROL.search(widget.value) is None
        assert "␛[31mred␛[0m" in widget.value


async def test_a_trace_carries_the_cut_and_reads_it_back() -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from thena_nb import telemetry

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry.instrument(provider, capture_content=True)
    try:
        model = ScriptedModel([reply.tool("dump", size=5000), "done"])
        run = await dumping(model, max_tool_result_chars=1000).arun("go", store=False)
    finally:
        telemetry.uninstrument()
        provider.shutdown()
    tool_span = next(s for s in exporter.get_finished_spans() if s.name == "execute_tool dump")
    assert (tool_span.attributes or {})["thena.tool_call.result_cut"] == 4000
    [back] = telemetry.runs_from_spans(exporter.get_finished_spans())
    assert back.turns[0].tool_calls[0].result_cut == run.turns[0].tool_calls[0].result_cut == 4000
