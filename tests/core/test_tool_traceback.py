"""`ToolCall.traceback`: a tool that raised keeps its traceback for people, never the model."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import add_call, calc, fail_call

from thena_nb import Agent, Workflow, loop, tool, until_answered
from thena_nb.core.records._secrets import scrub
from thena_nb.models import ScriptedModel, reply
from thena_nb.store import SqliteRunStore

pytestmark = pytest.mark.anyio


def _fail_then_answer() -> Workflow:
    return Workflow("w", [loop(steps=[calc([fail_call(), "done"])], until=until_answered)])


async def test_a_tool_that_raised_keeps_its_formatted_traceback() -> None:
    run = await _fail_then_answer().arun("go", store=False)
    call = run.turns[0].tool_calls[0]
    assert call.ok is False and call.traceback is not None
    assert call.traceback.startswith("Traceback (most recent call last):")
    assert "raise ValueError(reason)" in call.traceback
    assert call.traceback.rstrip().endswith("ValueError: boom")


async def test_a_tool_that_worked_or_was_never_run_has_no_traceback() -> None:
    model = ScriptedModel([add_call(), reply.tool("nope"), reply.tool("add", a="x"), "done"])
    wf = Workflow("w", [loop(steps=[calc([])], until=until_answered)])
    wf.steps[0].steps[0].model = model
    run = await wf.arun("go", store=False)
    ran, unknown, invalid = (t.tool_calls[0] for t in run.turns[:3])
    assert ran.ok and unknown.ok is False and invalid.ok is False
    assert ran.traceback is unknown.traceback is invalid.traceback is None


async def test_the_traceback_never_reaches_the_model() -> None:
    wf = _fail_then_answer()
    model = wf.steps[0].steps[0].model
    run = await wf.arun("go", store=False)
    assert run.turns[0].tool_calls[0].traceback
    second = model.requests[1]
    sent = second.model_dump_json()
    assert "Traceback" not in sent and "raise ValueError" not in sent
    tool_message = second.messages[-1]
    assert tool_message.role == "tool"
    assert tool_message.content == run.turns[0].tool_calls[0].error


async def test_the_traceback_is_of_the_last_attempt_after_retries() -> None:
    attempts: list[int] = []

    @tool(retries=2)
    def flaky() -> str:
        """Fails differently each time."""
        attempts.append(1)
        raise RuntimeError(f"attempt {len(attempts)}")

    agent = Agent("A", model=ScriptedModel([reply.tool("flaky"), "done"]), tools=[flaky])
    run = await Workflow("w", [loop(steps=[agent], until=until_answered)]).arun("go", store=False)
    call = run.turns[0].tool_calls[0]
    assert call.retries == 2 and call.traceback is not None
    assert "RuntimeError: attempt 3" in call.traceback
    assert "attempt 1" not in call.traceback


async def test_secrets_are_scrubbed_from_the_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXAMPLE_SERVICE_TOKEN", "tok-9f8e7d6c5b4a")

    @tool
    def fetch() -> str:
        """Fetch something with credentials in the URL."""
        key = "sk-ant-api03-abcdefghijklmnop"
        raise ConnectionError(
            f"GET https://api.example.com/v1?api_key=abcd1234wxyz failed; key {key}; "
            "token tok-9f8e7d6c5b4a; Authorization: Bearer eyJhbGciOi.payload.sig"
        )

    agent = Agent("A", model=ScriptedModel([reply.tool("fetch"), "done"]), tools=[fetch])
    run = await Workflow("w", [loop(steps=[agent], until=until_answered)]).arun("go", store=False)
    shown = run.turns[0].tool_calls[0].traceback
    assert shown is not None and "ConnectionError" in shown
    for secret in ("sk-ant-api03", "abcd1234wxyz", "tok-9f8e7d6c5b4a", "eyJhbGciOi"):
        assert secret not in shown
    assert "api_key=***" in shown and "Bearer ***" in shown


async def test_the_traceback_is_persisted_and_loaded_back(tmp_path: Path) -> None:
    with SqliteRunStore(tmp_path / "runs.db") as store:
        run = await _fail_then_answer().arun("go", store=store)
        loaded = store.load(run.run_id)
    kept = loaded.turns[0].tool_calls[0].traceback
    assert kept is not None and kept == run.turns[0].tool_calls[0].traceback
    assert "ValueError: boom" in kept


def test_scrub_leaves_ordinary_text_alone() -> None:
    text = "File \"tools.py\", line 12, in lookup\n    return table[key]\nKeyError: 'x'"
    assert scrub(text) == text


def test_scrub_removes_the_secrets_it_is_given() -> None:
    assert scrub("echoed my-own-key-123 back", also=["my-own-key-123", None]) == ("echoed *** back")
    assert scrub("short abc", also=["abc"]) == "short abc"  # too short to be a key
