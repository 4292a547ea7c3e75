"""Throughput of tool-call rescue on mixed text and adversarial inputs.

Run `python benchmarks/rescue_throughput.py` (about 1 MB per input) or add `--quick`
(about 100 KB). Prints MB/s per input; every input must scan in time linear in its size, so
the rates stay in the same range whatever the shape of the text.
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable

from thena_nb.core.model import ToolSpec
from thena_nb.core.rescue import scan_tool_calls

TOOLS = [
    ToolSpec(
        name="get_weather",
        parameters={
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    ),
    ToolSpec(
        name="search",
        parameters={
            "type": "object",
            "properties": {"query": {"type": "string"}},
            "required": ["query"],
        },
    ),
]

PIECES = [
    "The weather in Lisbon is mild in spring, and it rarely snows. ",
    'It\'s a "quoted" remark with an apostrophe, [a note] and (parentheses). ',
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Lisbon"}}\n</tool_call>\n',
    '{"name": "search", "arguments": {"query": "python asyncio"}}\n',
    "{'name': 'search', 'arguments': {'query': 'trailing',},}\n",
    '[get_weather(city="Paris"), search(query="x")]\n',
    '<function=get_weather>{"city": "Porto"}</function>\n',
    '```json\n{"name": "Lisbon", "population": 545000}\n```\n',
    "```python\nprint({'name': 'search'})\n```\n",
    "<think>maybe call get_weather</think>\n",
    "Thought: hmm\nAction: search\nAction Input: weather\n",
    '<invoke name="search"><parameter name="query">q</parameter></invoke>\n',
]


def mixed(size: int) -> str:
    rng = random.Random(7)
    out: list[str] = []
    n = 0
    while n < size:
        piece = rng.choice(PIECES)
        out.append(piece)
        n += len(piece)
    return "".join(out)[:size]


def repeat(unit: str) -> Callable[[int], str]:
    return lambda size: (unit * (size // len(unit) + 1))[:size]


INPUTS: dict[str, Callable[[int], str]] = {
    "mixed text": mixed,
    "deep nesting {": repeat("{"),
    "deep nesting [": repeat("["),
    "nested name objects": repeat('{"name": "search", "arguments": '),
    "balanced nesting": lambda size: "[" * (size // 2) + "]" * (size // 2),
    "quotes": repeat("\"'"),
    "brackets and quotes": repeat("[\"{'"),
    "backslashes": repeat('{"a": "\\'),
    "unclosed tool_call tags": repeat("<tool_call>{"),
    "unclosed invoke tags": repeat('<invoke name="search"><parameter name="query">'),
    "unclosed function tags": repeat("<function=search><parameter=query>"),
    "mistral markers": repeat("[TOOL_CALLS]search{"),
    "special tokens": repeat("<｜tool▁call▁begin｜>search<｜tool▁sep｜>{"),
    "think tags": repeat("<think>"),
    "fences": repeat("```json\n"),
    "many small calls": repeat('{"name": "search", "arguments": {"query": "q"}} '),
    "many repaired calls": repeat("{'name': 'search', 'arguments': {'query': 'q',},} "),
    "pythonic calls": repeat("[search(query='q')] "),
    "action lines": repeat("Action: search\n"),
    "long string": lambda size: '{"name": "search", "arguments": {"query": "' + "x" * size,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100 KB inputs instead of 1 MB")
    args = parser.parse_args()
    size = 100_000 if args.quick else 1_000_000
    print(f"{'input':<28}{'MB':>6}{'seconds':>9}{'MB/s':>8}{'calls':>7}")
    for label, make in INPUTS.items():
        text = make(size)
        start = time.perf_counter()
        scan = scan_tool_calls(text, TOOLS)
        elapsed = time.perf_counter() - start
        mb = len(text.encode()) / 1e6
        print(f"{label:<28}{mb:>6.2f}{elapsed:>9.3f}{mb / elapsed:>8.2f}{len(scan.calls):>7}")


if __name__ == "__main__":
    main()
