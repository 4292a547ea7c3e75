"""Issue 18's bugs in formats rescue already read, its safety findings, and the limits that
keep scanning linear. Each test names the finding it pins."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from thena_nb.core.records.model import ToolSpec
from thena_nb.core.rescue import MAX_CALLS, rescue_tool_calls, scan_tool_calls


def _spec(name: str, **props: str) -> ToolSpec:
    properties = {k: {"type": v} for k, v in props.items()}
    return ToolSpec(
        name=name, parameters={"type": "object", "properties": properties, "required": []}
    )


TOOLS = [
    _spec("get_weather", city="string"),
    _spec("search", query="string"),
    _spec("get_time"),
    _spec("route", **{"from": "string", "to": "string"}),
    _spec("foo", query="string"),
    _spec("bar", x="integer"),
]


def calls(text: str) -> list[tuple[str, dict[str, Any]]]:
    return [(c.name, c.arguments) for c in rescue_tool_calls(text, TOOLS)]


def test_deepseek_r1_short_opener() -> None:
    """DeepSeek-R1's `<｜tool▁calls｜>` opener without a per-call begin marker is read."""
    text = (
        '<｜tool▁calls｜>function<｜tool▁sep｜>search\n```json\n{"query": "rust"}\n```'
        "<｜tool▁call▁end｜><｜tool▁calls▁end｜>"
    )
    assert calls(text) == [("search", {"query": "rust"})]


def test_python_keyword_as_argument_name() -> None:
    """A keyword argument named like a Python keyword (`from=`) no longer breaks the call."""
    assert calls('[route(from="Lisbon", to="Porto")]') == [
        ("route", {"from": "Lisbon", "to": "Porto"})
    ]


def test_unparsable_call_keeps_its_siblings() -> None:
    """One call that cannot be read does not drop the valid ones beside it, in pythonic and
    in Cohere lists."""
    assert calls('[search(query="a"), search(query=os.environ), get_weather(city="Oslo")]') == [
        ("search", {"query": "a"}),
        ("get_weather", {"city": "Oslo"}),
    ]
    cohere = (
        '<|START_ACTION|>[{"tool_call_id": "0", "tool_name": "foo", "parameters": {"query": "q"}},'
        ' {"tool_call_id": "1", "tool_name": "bar", "parameters": {"x": }}]<|END_ACTION|>'
    )
    assert calls(cohere) == [("foo", {"query": "q"})]


def test_braced_text_is_not_a_placeholder() -> None:
    """`"{not json}"` is a value; `{city}` for the city, and `{{city}}`, are placeholders."""
    assert calls('{"name": "search", "arguments": {"query": "{not json}"}}') == [
        ("search", {"query": "{not json}"})
    ]
    assert calls('{"name": "search", "arguments": {"query": "{value}"}}') == [
        ("search", {"query": "{value}"})
    ]
    assert calls('{"name": "get_weather", "arguments": {"city": "{city}"}}') == []
    assert calls('{"name": "search", "arguments": {"query": "{{ query }}"}}') == []


def test_unclosed_function_call_lines_keep_every_call() -> None:
    """Two `<function_call>` lines that never close each keep their call."""
    text = (
        '<function_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}\n'
        '<function_call>{"name": "search", "arguments": {"query": "rust"}}'
    )
    assert calls(text) == [("get_weather", {"city": "Oslo"}), ("search", {"query": "rust"})]


def test_name_only_object_in_prose_is_no_call() -> None:
    """A `{"name": N}` object with no arguments key, in prose, names something; inside a call
    wrapper it is a call with no arguments."""
    assert calls('The tool is {"name": "get_time"}, as configured.') == []
    assert calls('{"name": "get_time"}') == []
    assert calls('<tool_call>{"name": "get_time"}</tool_call>') == [("get_time", {})]


def test_bytes_literal_is_not_a_value() -> None:
    assert calls("[search(query=b'z')]") == []


def test_unhashable_key_does_not_raise() -> None:
    """`[get_weather(city={[1]: 2})]` made the scan raise `TypeError`; now it is no call."""
    for text in (
        "[get_weather(city={[1]: 2})]",
        "```tool_code\nprint(default_api.get_weather(city={[1]: 2}))\n```",
        "{'name': 'get_weather', 'arguments': {'city': {[1]: 2}}}",
        "Action: get_weather\nAction Input: {'city': {[1]: 2}}",
        "<|python_tag|>get_weather.call(city={[1]: 2})",
    ):
        assert calls(text) == []


def test_json_repair_is_not_used() -> None:
    """Near-JSON is read by rescue's own linear reader; json_repair (whose cost grows
    faster than its input) is never imported by a scan."""
    code = (
        "import sys\n"
        "from thena_nb.core.records.model import ToolSpec\n"
        "from thena_nb.core.rescue import rescue_tool_calls\n"
        "t = ToolSpec(name='search', parameters={'type': 'object', 'properties': {}})\n"
        "rescue_tool_calls(\"{'name': 'search', 'arguments': {'q': 'x',},}\", [t])\n"
        "print('json_repair' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", out.stderr


def test_at_most_max_calls() -> None:
    """A text with more calls than `MAX_CALLS` yields the first `MAX_CALLS`, numbered in order."""
    text = " ".join(f'{{"name": "search", "arguments": {{"query": "q{k}"}}}}' for k in range(200))
    scan = scan_tool_calls(text, TOOLS)
    assert len(scan.calls) == MAX_CALLS
    assert scan.calls[-1].arguments == {"query": f"q{MAX_CALLS - 1}"}
    assert scan.calls[-1].id == f"rescued-{MAX_CALLS}"


def test_large_valid_json_is_read_but_large_broken_json_is_not_repaired() -> None:
    """Valid JSON of any size is read (`json.loads` is linear); near-JSON over the cap only
    gets strict parsing."""
    big = "x" * 100_000
    assert calls(f'{{"name": "search", "arguments": {{"query": "{big}"}}}}') == [
        ("search", {"query": big})
    ]
    assert calls(f"{{'name': 'search', 'arguments': {{'query': '{big}'}}}}") == []
    assert calls("{'name': 'search', 'arguments': {'query': 'small'}}") == [
        ("search", {"query": "small"})
    ]
