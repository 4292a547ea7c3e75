"""Issue 19: shapes rescue still missed (ReAct variants, Anthropic's legacy `<tool_name>`
invoke, transcript lines) and one it mistook for a call (a call shown in inline code). The
corpus (`test_corpus.py`) holds each shape with its source; these tests pin the details."""

from __future__ import annotations

import json

from hypothesis import assume, given
from hypothesis import strategies as st

from thena_nb.core.records.model import ToolSpec
from thena_nb.core.rescue import rescue_tool_calls, scan_tool_calls
from thena_nb.core.rescue._blocks import inline_code


def _spec(name: str, required: tuple[str, ...] = (), **props: str) -> ToolSpec:
    properties = {k: {"type": v} for k, v in props.items()}
    schema = {"type": "object", "properties": properties, "required": list(required)}
    return ToolSpec(name=name, parameters=schema)


TOOLS = [
    _spec("search", ("query",), query="string"),
    _spec("get_weather", ("city",), city="string"),
    _spec("set_timer", ("seconds",), seconds="integer", loud="boolean"),
]
W = '{"name": "get_weather", "arguments": {"city": "Oslo"}}'


def calls(text: str) -> list[tuple[str, dict[str, object]]]:
    return [(c.name, c.arguments) for c in rescue_tool_calls(text, TOOLS)]


def test_lowercase_action_input_is_the_input_not_a_call_without_arguments() -> None:
    """`Action input:` was not seen as the input line, so the action became a call with no
    arguments, run as a failed call; now the input is read."""
    scan = scan_tool_calls('Action: search\nAction input:\n{"query": "rust"}', TOOLS)
    assert [(c.name, c.arguments) for c in scan.calls] == [("search", {"query": "rust"})]
    assert scan.invalid == []


def test_action_name_on_its_own_line() -> None:
    """`Action:` with the name on the next line, the input after a blank line, as JSON or
    text; a line that is no name yields nothing."""
    assert calls('Action:\nsearch\n\nAction Input:\n{"query": "rust"}') == [
        ("search", {"query": "rust"})
    ]
    assert calls("Action:\nsearch\nAction Input: rust") == [("search", {"query": "rust"})]
    assert calls("Action:\nI will look it up\nAction Input: rust") == []


def test_legacy_invoke_values_are_typed_by_the_schema() -> None:
    """Element values are text typed by the schema; an unclosed element or a cut-off
    `<parameters>` is no call; a namespace on the tags is allowed."""
    text = (
        "<invoke><tool_name>set_timer</tool_name><parameters><seconds>90</seconds>"
        "<loud>false</loud></parameters></invoke>"
    )
    assert calls(text) == [("set_timer", {"seconds": 90, "loud": False})]
    ns = (
        "<ns:invoke><ns:tool_name>search</ns:tool_name><ns:parameters><ns:query>rust"
        "</ns:query></ns:parameters></ns:invoke>"
    )
    assert calls(ns) == [("search", {"query": "rust"})]
    unclosed = "<invoke><tool_name>search</tool_name><parameters><query>rust</parameters></invoke>"
    assert calls(unclosed) == []
    assert calls("<invoke><tool_name>search</tool_name><parameters><query>rust</query>") == []


def test_transcript_line_needs_complete_arguments_and_its_bracket() -> None:
    """A transcript line counts with a complete JSON object and its closing bracket (or the
    end of the text); text glued after the object is no call."""
    line = '[Calling tool: search with arguments: {"query": "rust"}]'
    assert calls(line) == [("search", {"query": "rust"})]
    assert calls(line[:-1]) == [("search", {"query": "rust"})]
    assert calls('[calling tool: `search` with args: {"query": "rust"}]') == [
        ("search", {"query": "rust"})
    ]
    assert calls('[Calling tool: search with arguments: {"query": "rust"} and more]') == []
    assert calls("[Calling tool: search with arguments: rust]") == []


def test_inline_code_spans_pair_like_commonmark() -> None:
    """A run of backticks closes at the next run of the same length on the same line; an
    unmatched run is text; a span never crosses a line."""
    text = "a `x` b ``y ` z`` c `open\nd` e"
    spans = [text[a:b] for a, b in inline_code(text)]
    assert spans == ["`x`", "``y ` z``"]
    assert inline_code("no code") == []


def test_call_in_inline_code_within_prose_is_not_a_call() -> None:
    """A call inside inline code in a sentence is shown, not made; the same call beside
    inline code, or a reply that is only the code span, is a call."""
    assert calls(f"Reply with `{W}` to get the weather.") == []
    assert calls(f"`{W}`") == [("get_weather", {"city": "Oslo"})]
    assert calls(f"Checking `Oslo`: {W}") == [("get_weather", {"city": "Oslo"})]


@given(st.text(min_size=1, max_size=30), st.sampled_from(["Send", "Use", "Try"]))
def test_any_wrapped_call_in_inline_code_is_not_a_call(city: str, verb: str) -> None:
    """Whatever the arguments, a `<tool_call>` written inside inline code in a sentence
    yields no call and no invalid call."""
    assume("`" not in city and "\n" not in city)
    call = json.dumps({"name": "get_weather", "arguments": {"city": city}})
    scan = scan_tool_calls(f"{verb} `<tool_call>{call}</tool_call>` to check it.", TOOLS)
    assert scan.calls == [] and scan.invalid == []
