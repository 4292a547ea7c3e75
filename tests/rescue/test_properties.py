"""Properties of tool-call rescue that hold for any text: it never raises, never names an
unknown tool, never evaluates code, is deterministic, and finishes quickly on hostile input."""

from __future__ import annotations

import builtins
import json
import sys
import time
from typing import Any, Literal

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from thena_nb.core.model import ToolSpec
from thena_nb.core.rescue import rescue_tool_calls, scan_tool_calls
from thena_nb.core.tools import Tool, tool


@tool
def get_weather(city: str, unit: Literal["celsius", "fahrenheit"] = "celsius") -> str:
    """Current weather for a city."""
    return city


@tool
def search(query: str, limit: int = 5) -> str:
    """Search the web."""
    return query


@tool(rescue=False)
def send_mail(to: str, body: str) -> str:
    """Send an email."""
    return "sent"


lookup_stock = ToolSpec(
    name="lookup_stock",
    parameters={
        "type": "object",
        "properties": {"symbol": {"type": "string"}},
        "required": ["symbol"],
        "additionalProperties": False,
    },
)

TOOLS: list[Tool | ToolSpec] = [get_weather, search, send_mail, lookup_stock]
NAMES = {"get_weather", "search", "send_mail", "lookup_stock"}

FRAGMENTS = [
    "{",
    "}",
    "[",
    "]",
    '"',
    "'",
    "\\",
    ",",
    ":",
    "\n",
    " ",
    "(",
    ")",
    "...",
    '"name"',
    '"arguments"',
    '"get_weather"',
    '"search"',
    '"send_mail"',
    '"lookup_stock"',
    '"execute_python"',
    '"city"',
    '"Lisbon"',
    "'query'",
    "True",
    "None",
    "get_weather(",
    "search(query=",
    "city=",
    "__import__('os')",
    "<tool_call>",
    "</tool_call>",
    "<think>",
    "</think>",
    "<function=get_weather>",
    "</function>",
    "<parameter=city>",
    "</parameter>",
    '<invoke name="search">',
    '<parameter name="query">',
    "</invoke>",
    "<function_calls>",
    "[TOOL_CALLS]",
    "[ARGS]",
    "```json\n",
    "```python\n",
    "```\n",
    "Action: search\n",
    "Action Input: ",
    "Observation: ",
    "> ",
    "<｜tool▁call▁begin｜>",
    "<｜tool▁sep｜>",
    "<｜tool▁call▁end｜>",
    "<|tool_call_begin|>functions.search:0",
    "<|tool_call_argument_begin|>",
    "<|tool_call_end|>",
    "For example, ",
    "I'll call it: ",
]

call_like_text = st.lists(
    st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=8)), max_size=60
).map("".join)
any_text = st.one_of(st.text(), call_like_text)

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(any_text)
def test_never_raises_and_names_only_known_tools(text: str) -> None:
    """Any text scans without raising; every call names a tool the agent has and validates."""
    scan = scan_tool_calls(text, TOOLS)
    for call in scan.calls:
        assert call.name in NAMES - {"send_mail"}
        assert call.source == "rescued"
        tool_ = next(t for t in TOOLS if t.name == call.name)
        if isinstance(tool_, Tool):
            tool_.validate(call.arguments)
    assert {r.name for r in scan.refused} <= {"send_mail"}
    assert all(r.ok is False and r.error for r in scan.refused)


@SETTINGS
@given(any_text)
def test_deterministic(text: str) -> None:
    """The same text always gives the same calls."""
    assert scan_tool_calls(text, TOOLS) == scan_tool_calls(text, TOOLS)


@SETTINGS
@given(call_like_text)
def test_never_evaluates(text: str) -> None:
    """Rescue parses text and never runs it: `eval` and `exec` are never called."""

    def forbidden(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("rescue evaluated text")

    saved = builtins.eval, builtins.exec
    builtins.eval, builtins.exec = forbidden, forbidden
    try:
        scan_tool_calls(text, TOOLS)
    finally:
        builtins.eval, builtins.exec = saved


def test_code_in_arguments_is_not_run() -> None:
    """Code written as an argument is not a literal: the call is dropped and nothing runs;
    in XML, where values are text, it stays text."""
    payload = "__import__('sys').modules.__setitem__('rescue_was_evaluated', 1)"
    code = [
        f"[get_weather(city={payload})]",
        f"```tool_code\nprint(default_api.get_weather(city={payload}))\n```",
        f"{{'name': 'get_weather', 'arguments': {{'city': {payload}}}}}",
        f"Action: get_weather\nAction Input: {{'city': {payload}}}",
    ]
    for text in code:
        assert rescue_tool_calls(text, TOOLS) == []
    xml = f"<function=get_weather><parameter=city>{payload}</parameter></function>"
    assert [c.arguments for c in rescue_tool_calls(xml, TOOLS)] == [{"city": payload}]
    assert "rescue_was_evaluated" not in sys.modules


@SETTINGS
@given(st.text(min_size=1, max_size=40), st.sampled_from(["celsius", "fahrenheit"]))
def test_a_wrapped_call_round_trips(city: str, unit: str) -> None:
    """Any city written in a Hermes `<tool_call>` comes back exactly (no placeholder-like or
    markup-breaking values)."""
    assume(city.strip() and city.strip().strip(".…") and not city.isupper())
    assume(city.strip().lower() not in {"string", "str", "integer", "int", "number", "float"})
    assume(not (city.strip().startswith(("<", "{")) and city.strip().endswith((">", "}"))))
    assume("<think" not in city and "</tool_call>" not in city)
    arguments = {"city": city, "unit": unit}
    text = f"<tool_call>{json.dumps({'name': 'get_weather', 'arguments': arguments})}</tool_call>"
    calls = rescue_tool_calls(text, TOOLS)
    assert [(c.name, c.arguments) for c in calls] == [("get_weather", arguments)]


ADVERSARIAL = {
    "open braces": "{" * 200_000,
    "open brackets": "[" * 200_000,
    "balanced nesting": "[" * 100_000 + "]" * 100_000,
    "nested calls": '{"name": "search", "arguments": ' * 6_000,
    "quotes": "\"'" * 100_000,
    "backslashes": '{"a": "\\' * 30_000,
    "tags": "<tool_call>{" * 16_000,
    "invokes": '<invoke name="search"><parameter name="query">' * 4_000,
    "think": "<think>" * 28_000,
    "repaired calls": "{'name': 'search', 'arguments': {'query': 'q',},} " * 4_000,
    "deep call": '{"name": "search", "arguments": {"query": "q", "x": '
    + "[" * 60_000
    + "]" * 60_000
    + "}}",
}


@pytest.mark.parametrize("label", list(ADVERSARIAL))
def test_adversarial_input_finishes(label: str) -> None:
    """A ~200 KB hostile input scans in well under 5 s (a generous bound: it is linear)."""
    text = ADVERSARIAL[label]
    start = time.perf_counter()
    scan_tool_calls(text, TOOLS)
    assert time.perf_counter() - start < 5.0
