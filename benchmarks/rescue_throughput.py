"""W6: throughput of tool-call rescue on mixed text and on adversarial shapes.

    python benchmarks/rescue_throughput.py                  # 10 KB, 100 KB and 1 MB inputs
    python benchmarks/rescue_throughput.py --quick          # 10 KB and 100 KB only
    python benchmarks/rescue_throughput.py --json out.json  # also write the figures

Each shape is built at each size and scanned with `scan_tool_calls`, in rounds that run
the sizes back to back. Times are the best CPU time (`time.process_time`, which a busy
machine disturbs less than wall time) over the rounds; growth is the median over the rounds
of the time at 10x the size over the time at the size, so both sides of each ratio ran under
the same load. Targets: every shape scans in at most 1 s at 1 MB, and at most 12x the time
at 10x the size (rescue is linear in its input, whatever the shape).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import pairwise

from thena_nb.core.records.model import ToolSpec
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
    '<|channel|>commentary to=functions.search <|constrain|>json<|message|>{"query": "q"}<|call|>',
    '<|tool_call>call:get_weather{city:<|"|>Oslo<|"|>}<tool_call|>\n',
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


def json_blob(size: int) -> str:
    """One valid JSON object of `size` characters that names a tool."""
    head = '{"name": "search", "arguments": {"query": "q", "rows": ['
    rows = '{"id": 1, "text": "a \\"quoted\\" row, [with] {brackets}"}, '
    body = (rows * (size // len(rows) + 1))[: max(0, size - len(head) - 40)]
    return head + body.rsplit("}, ", 1)[0] + "}]}}"


def broken_json_blob(size: int) -> str:
    """The same blob with a missing value near the end, so strict JSON fails."""
    blob = json_blob(size)
    return blob[:-12] + ', "x": }]}}'


SHAPES: dict[str, Callable[[int], str]] = {
    "mixed text": mixed,
    "nested brackets {": repeat("{"),
    "nested brackets [": repeat("["),
    "nested brackets {[ mixed": repeat("{[{[[{"),
    "balanced nesting": lambda size: "[" * (size // 2) + "]" * (size // 2),
    "mismatched closers": repeat("{]"),
    "nested name objects": repeat('{"name": "search", "arguments": '),
    "unclosed <tool_call> tags": repeat("<tool_call>"),
    "unclosed <tool_call>{ tags": repeat("<tool_call>{"),
    "runs of quotes": repeat("\"'"),
    "runs of backslashes": repeat("\\"),
    "quotes and backslashes in JSON": repeat('{"a": "\\'),
    "brackets and quotes": repeat("[\"{'"),
    "1 MB JSON blob naming a tool": json_blob,
    "broken JSON blob naming a tool": broken_json_blob,
    "long unclosed string": lambda size: '{"name": "search", "arguments": {"query": "' + "x" * size,
    "unclosed invoke tags": repeat('<invoke name="search"><parameter name="query">'),
    "unclosed function tags": repeat("<function=search><parameter=query>"),
    "special tokens": repeat("<｜tool▁call▁begin｜>search<｜tool▁sep｜>{"),
    "harmony headers": repeat("<|start|>assistant<|channel|>commentary to=functions.search"),
    "harmony messages": repeat('<|channel|>analysis<|message|>{"query": "q"<|end|>'),
    "gemma openers": repeat('<|tool_call>call:search{query:<|"|>'),
    "mistral markers": repeat("[TOOL_CALLS]search{"),
    "think tags": repeat("<think>"),
    "fences": repeat("```json\n"),
    "many small calls": repeat('{"name": "search", "arguments": {"query": "q"}} '),
    "many repaired calls": repeat("{'name': 'search', 'arguments': {'query': 'q',},} "),
    "many rejected calls": repeat('{"name": "search", "arguments": {"query": 1}} '),
    "pythonic calls": repeat("[search(query='q')] "),
    "action lines": repeat("Action: search\n"),
}

SIZES = (10_000, 100_000, 1_000_000)
LIMIT_AT_1MB = 1.0
LIMIT_RATIO = 12.0


@dataclass
class Row:
    """One shape's CPU times per size (every round) and the calls found."""

    shape: str
    rounds: list[dict[int, float]] = field(default_factory=list)
    calls: dict[int, int] = field(default_factory=dict)

    @property
    def seconds(self) -> dict[int, float]:
        """The best time per size over the rounds."""
        return {size: min(r[size] for r in self.rounds) for size in self.rounds[0]}

    def growth(self) -> float:
        """The largest, over successive sizes, median over rounds of their time ratio."""
        sizes = sorted(self.rounds[0])
        return max(
            statistics.median(r[b] / max(r[a], 1e-9) for r in self.rounds)
            for a, b in pairwise(sizes)
        )


def cpu_time(text: str) -> tuple[float, int]:
    start = time.process_time()
    scan = scan_tool_calls(text, TOOLS)
    return time.process_time() - start, len(scan.calls)


def measure(sizes: tuple[int, ...], rounds: int) -> list[Row]:
    rows: list[Row] = []
    for label, make in SHAPES.items():
        row = Row(label)
        texts = {size: make(size) for size in sizes}
        # Each round runs the sizes back to back, so load elsewhere hits them alike.
        for _ in range(rounds):
            times: dict[int, float] = {}
            for size in sizes:
                times[size], row.calls[size] = cpu_time(texts[size])
            row.rounds.append(times)
        rows.append(row)
    return rows


def render(rows: list[Row], sizes: tuple[int, ...]) -> str:
    header = f"{'shape':<34}" + "".join(f"{_size(s):>10}" for s in sizes) + f"{'x10':>7}"
    lines = [header, "-" * len(header)]
    for row in rows:
        times = "".join(f"{row.seconds[s] * 1000:>8.1f}ms" for s in sizes)
        lines.append(f"{row.shape:<34}{times}{row.growth():>6.1f}x")
    return "\n".join(lines)


def _size(size: int) -> str:
    return f"{size // 1_000_000} MB" if size >= 1_000_000 else f"{size // 1000} KB"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10 KB and 100 KB inputs only")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    sizes = SIZES[:2] if args.quick else SIZES
    rows = measure(sizes, rounds=5 if args.quick else 9)
    print(render(rows, sizes))
    slowest = max(r.seconds[sizes[-1]] for r in rows)
    worst = max(r.growth() for r in rows)
    met = {f"≤ {LIMIT_RATIO:.0f}x the time at 10x the size": worst <= LIMIT_RATIO}
    if sizes[-1] == 1_000_000:
        met[f"every shape ≤ {LIMIT_AT_1MB:.0f} s at 1 MB"] = slowest <= LIMIT_AT_1MB
    print(f"\nslowest at {_size(sizes[-1])}: {slowest:.3f} s; worst growth per 10x: {worst:.1f}x")
    print("targets: " + ", ".join(f"{k} {'met' if v else 'MISSED'}" for k, v in met.items()))
    if args.json:
        with open(args.json, "w") as fh:
            figures = [
                {"shape": r.shape, "seconds": r.seconds, "growth": r.growth(), "calls": r.calls}
                for r in rows
            ]
            json.dump({"sizes": list(sizes), "rows": figures, "met": met}, fh, indent=2)


if __name__ == "__main__":
    main()
