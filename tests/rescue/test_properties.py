"""Properties of tool-call rescue that hold for any text: it never raises (on arbitrary text
and on near-misses of every format: unhashable keys, deep nesting, unclosed tags, NUL bytes,
lone surrogates), never names an unknown tool, never evaluates code, and is deterministic.
How fast it is lives in `benchmarks/rescue_throughput.py`."""

from __future__ import annotations

import builtins
import json
import sys
from typing import Any, Literal

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from thena_nb.core.parts.tools import Tool, tool
from thena_nb.core.records.model import ToolSpec
from thena_nb.core.rescue import MAX_CALLS, rescue_tool_calls, scan_tool_calls, split_reasoning


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
    # formats read since issue 18
    "<|channel|>analysis<|message|>",
    "<|channel|>commentary to=functions.search <|constrain|>json<|message|>",
    "<|start|>assistant to=functions.get_weather<|channel|>commentary<|message|>",
    "<|end|>",
    "<|call|>",
    "<|tool_call>call:get_weather{",
    'city:<|"|>',
    '<|"|>',
    "<tool_call|>",
    "<|channel>thought\n",
    "<channel|>",
    "<start_function_call>call:search{query:<escape>",
    "<escape>",
    "<｜DSML｜function_calls>",
    '<｜DSML｜invoke name="search">',
    '<｜DSML｜parameter name="query" string="false">',
    "</｜DSML｜parameter>",
    '<steptml:invoke name="get_weather">',
    "<｜tool_calls_begin｜><｜tool_call_begin｜>",
    "<｜tool▁calls｜>function<｜tool▁sep｜>",
    "<|tools_prefix|>",
    '[{"get_weather": ',
    "<|python_tag|>search.call(query=",
    ">>>search\n",
    ">>>all\n",
    "<seed:think>",
    "</seed:think>",
    "<|START_ACTION|>",
    # shapes read since issue 19
    "[Calling tool: search with arguments: ",
    "<invoke>",
    "<tool_name>search</tool_name>",
    "<parameters>",
    "<query>",
    "</query>",
    "</parameters>",
    "Action:\n",
    "Action input: ",
    "<arg_key>",
    "<arg_value>",
    "`",
    "``",
    "{[1]: 2}",
    "1e999",
    "NaN",
    "b'z'",
    "from=",
    "\x00",
    "\ud800",
    "\udfff",
]

# Lone surrogates and NUL are in the alphabet: model text can hold anything.
any_char = st.characters(exclude_categories=())
call_like_text = st.lists(
    st.one_of(st.sampled_from(FRAGMENTS), st.text(any_char, max_size=8)), max_size=60
).map("".join)
any_text = st.one_of(st.text(any_char), call_like_text)

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
@given(any_text)
@example(  # a call whose arguments fail validation (`invalid`) takes its id in the count
    "<|channel|> to=functions.search<|message|><|start|>assistant to=functions.get_weather"
    "<|message|>}"
)
def test_ids_and_reasoning_fields(text: str) -> None:
    """Ids count calls, refused calls and invalid calls together in text order; at most
    `MAX_CALLS` are taken; reasoning and text are strings or `None`, as `split_reasoning`
    finds them."""
    scan = scan_tool_calls(text, TOOLS, id_prefix="p")
    found = [*scan.calls, *scan.refused, *scan.invalid]
    ids = sorted(int(c.id.rsplit("-", 1)[1]) for c in found)
    assert ids == list(range(1, len(ids) + 1))
    assert len(ids) <= MAX_CALLS
    reasoning, rest = split_reasoning(text)
    assert scan.reasoning == reasoning
    assert (scan.text if scan.text is not None else text) == rest


# -- structured near-misses ---------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(any_char, max_size=6),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.text(any_char, max_size=5), children, max_size=3)
    ),
    max_leaves=12,
)
TEMPLATES = [
    '<tool_call>{{"name": "search", "arguments": {v}}}</tool_call>',
    '{{"name": "get_weather", "arguments": {v}}}',
    "<|channel|>commentary to=functions.search <|constrain|>json<|message|>{v}<|call|>",
    "<|tool_call>call:search{v}<tool_call|>",
    '<｜DSML｜function_calls><｜DSML｜invoke name="search">{v}</｜DSML｜invoke></｜DSML｜function_calls>',
    '<|tools_prefix|>[{{"search": {v}}}]<|tools_suffix|>',
    ">>>search\n{v}",
    "<function=search>{v}</function>",
    "[TOOL_CALLS]search[ARGS]{v}",
    "[search(query={v})]",
    "<|python_tag|>search.call(query={v})",
]


@st.composite
def near_misses(draw: st.DrawFn) -> str:
    """A call in one of the formats around any JSON value, then cut or spliced at random."""
    template = draw(st.sampled_from(TEMPLATES))
    value = json.dumps(draw(json_values), ensure_ascii=draw(st.booleans()))
    text = template.format(v=value)
    cut = draw(st.integers(0, len(text)))
    splice = draw(st.sampled_from(["", *FRAGMENTS[-12:]]))
    return text[:cut] + splice + text[cut:] if draw(st.booleans()) else text[:cut]


UNHASHABLE = [
    "[get_weather(city={[1]: 2})]",
    "[search(query={{1: 2}: 3})]",
    "```tool_code\nprint(default_api.search(query={[1]: 2}))\n```",
    "Action: search\nAction Input: {[1]: 2}",
    "{'name': 'search', 'arguments': {[1]: 2}}",
]


@SETTINGS
@given(near_misses())
def test_near_misses_never_raise(text: str) -> None:
    """Calls in every format, cut short or spliced with markers, scan without raising."""
    scan = scan_tool_calls(text, TOOLS)
    assert {c.name for c in scan.calls} <= NAMES - {"send_mail"}


@pytest.mark.parametrize("text", UNHASHABLE)
def test_unhashable_keys(text: str) -> None:
    """A dict literal with an unhashable key is no value: no call, and no `TypeError`."""
    assert rescue_tool_calls(text, TOOLS) == []


def test_unhashable_keys_in_xml_stay_text() -> None:
    """In XML a value is text: for a string parameter it stays the text the model wrote."""
    texts = [
        "<function=search><parameter=query>{[1]: 2}</parameter></function>",
        '<invoke name="search"><parameter name="query">{[1]: 2}</parameter></invoke>',
    ]
    for text in texts:
        assert [c.arguments for c in rescue_tool_calls(text, TOOLS)] == [{"query": "{[1]: 2}"}]


@pytest.mark.parametrize("depth", [10, 63, 64, 65, 1_000, 100_000])
def test_deep_nesting(depth: int) -> None:
    """Arguments nested deeper than the readers read are refused, at any depth."""
    inner = "[" * depth + "]" * depth
    for text in (
        f'{{"name": "search", "arguments": {{"query": "q", "x": {inner}}}}}',
        f"{{'name': 'search', 'arguments': {{'query': 'q', 'x': {inner},}}}}",
        f"[search(query='q', x={inner})]",
        f'<|tool_call>call:search{{query:<|"|>q<|"|>,x:{inner}}}<tool_call|>',
    ):
        calls = rescue_tool_calls(text, TOOLS)
        assert calls == [] or depth < 64


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
    type_words = {"string", "str", "integer", "int", "number", "float", "boolean", "bool"}
    assume(city.strip().lower() not in type_words)
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
    "harmony headers": "<|start|>assistant<|channel|>commentary to=functions.search" * 3_000,
    "gemma openers": '<|tool_call>call:search{query:<|"|>' * 6_000,
    "unclosed DSML": '<｜DSML｜invoke name="search"><｜DSML｜parameter name="query">' * 2_000,
    "nul and surrogates": '\x00\ud800{\udfff["\x00' * 30_000,
    "transcript lines": "[Calling tool: search with arguments: {" * 5_000,
    "legacy invokes": "<invoke><tool_name>search</tool_name><parameters><query>" * 3_500,
    "backticks": "`a``" * 50_000,
    "calls in inline code": '`{"name": "search", "arguments": {"query": "q"}}` ' * 4_000,
}


@pytest.mark.parametrize("label", list(ADVERSARIAL))
def test_adversarial_input_scans(label: str) -> None:
    """A ~200 KB hostile input scans without raising and yields only valid calls."""
    scan = scan_tool_calls(ADVERSARIAL[label], TOOLS)
    assert len(scan.calls) <= MAX_CALLS
    assert {c.name for c in scan.calls} <= NAMES - {"send_mail"}
