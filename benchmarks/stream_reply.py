"""W10: one long answer through each real adapter, streamed and not, CPU per call and chunk.

    python -m benchmarks.stream_reply                          # 250 words, 20 calls each way
    python -m benchmarks.stream_reply --adapter anthropic
    python -m benchmarks.stream_reply --words 1000 --calls 10
    python -m benchmarks.stream_reply --code ../before --code .   # before and after
    python benchmarks/stream_reply.py --quick                   # five calls each way

A streamed answer arrives as a few characters at a time: `benchmarks/_api_server.py` sends
its "done" and WORDS more words in SSE chunks of four characters (about 5 × WORDS / 4
chunks), as servers stream tokens, from a process of its own so that only the client's work
counts. Each adapter and checkout runs in a child process (`--child ADAPTER WORDS CALLS`),
which makes CALLS calls of the model's `respond` with `stream=True` (text pieces going to an
`on_text_delta` callback, as a notebook shows them) and CALLS without, after two of each
untimed, and checks every reply's text. A figure is the median over the calls, in µs of
CPU (`time.process_time`) per call, and per chunk for the streamed ones.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.import_cost import against_first, child_row

ROOT = Path(__file__).resolve().parent.parent
CODE_ENV = "THENA_NB_BENCH_CODE"
ADAPTERS = ("openai", "anthropic")


def _model(adapter: str, port: int, stream: bool) -> Any:
    if adapter == "openai":
        from thena_nb.models.openai_compat import OpenAICompatModel

        base_url = f"http://127.0.0.1:{port}/v1"
        return OpenAICompatModel("bench-model", base_url=base_url, stream=stream)
    from thena_nb.models.anthropic import AnthropicModel

    base_url = f"http://127.0.0.1:{port}"
    return AnthropicModel("bench-model", base_url=base_url, api_key="sk-ant-bench", stream=stream)


def _child(adapter: str, words: int, calls: int) -> dict[str, Any]:
    """`calls` streamed and `calls` plain calls of a `words`-word answer, in this process."""
    code = os.environ.get(CODE_ENV)
    if code:
        sys.path.insert(0, code)
    from thena_nb.core.records.model import ModelRequest
    from thena_nb.core.records.types import Message

    server = subprocess.Popen(
        [sys.executable, "-m", "benchmarks._api_server", "1", str(words)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    expected = "done" + " word" * words
    pieces: list[str] = []
    chunks = 0
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        request = ModelRequest(
            agent="A", messages=[Message(role="user", content="go")], on_text_delta=pieces.append
        )

        async def timed(model: Any) -> list[float]:
            nonlocal chunks
            cpus = []
            for k in range(calls + 2):  # two untimed first
                pieces.clear()
                c0 = time.process_time()
                reply = await model.respond(request)
                if k >= 2:
                    cpus.append(time.process_time() - c0)
                if reply.text != expected or (model.stream and "".join(pieces) != expected):
                    raise AssertionError(f"the answer came back as {reply.text[:40]!r}…")
                if model.stream:
                    chunks = len(pieces)  # the text's pieces, as `on_text_delta` got them
            return cpus

        async def both() -> tuple[list[float], list[float]]:
            return await timed(_model(adapter, port, True)), await timed(
                _model(adapter, port, False)
            )

        streamed_s, plain_s = asyncio.run(both())
    finally:
        server.kill()
        server.wait()
    return {
        "adapter": adapter,
        "words": words,
        "calls": calls,
        "text_chunks": chunks,
        "streamed_us": statistics.median(streamed_s) * 1e6,
        "plain_us": statistics.median(plain_s) * 1e6,
        "streamed_us_per_chunk": statistics.median(streamed_s) * 1e6 / max(chunks, 1),
    }


def measure(adapter: str, words: int, calls: int, code_dir: Path) -> dict[str, Any]:
    """One child process's figures for `adapter` with `code_dir`'s thena_nb."""
    args = [adapter, str(words), str(calls)]
    return child_row("benchmarks.stream_reply", args, code_dir, ROOT)


def render(rows: list[dict[str, Any]]) -> str:
    """The rows as a text table; beside each checkout after the first, the change."""
    head = f"{'words':>6} {'chunks':>7} {'streamed µs':>12} {'µs/chunk':>9} {'plain µs':>9}"
    lines = [f"{'adapter':<10} {head}  code"]
    first: dict[Any, float] = {}
    for r in rows:
        key = (r["adapter"], r["words"])
        streamed = against_first(first, (*key, "streamed"), r["streamed_us"])
        plain = against_first(first, (*key, "plain"), r["plain_us"])
        change = f"  (streamed {streamed[3:-1]}, plain {plain[3:-1]})" if streamed else ""
        lines.append(
            f"{r['adapter']:<10} {r['words']:>6} {r['text_chunks']:>7} {r['streamed_us']:>12,.0f} "
            f"{r['streamed_us_per_chunk']:>9,.0f} {r['plain_us']:>9,.0f}  {r['code']}{change}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Measure, print a table and optionally write JSON (or, with `--child`, be one child)."""
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--child"]:
        numbers = args[2:]
        if len(args) != 4 or args[1] not in ADAPTERS or not all(a.isdigit() for a in numbers):
            raise SystemExit("usage: --child {openai,anthropic} WORDS CALLS (CALLS at least 1)")
        if int(args[3]) < 1:
            raise SystemExit("usage: --child {openai,anthropic} WORDS CALLS (CALLS at least 1)")
        print(json.dumps(_child(args[1], int(args[2]), int(args[3]))))
        return 0
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--adapter", action="append", choices=ADAPTERS, help="repeatable")
    parser.add_argument("--words", type=int, nargs="+", default=[250], help="(250)")
    parser.add_argument("--calls", type=int, default=20, help="timed calls each way (20)")
    parser.add_argument("--code", action="append", help="a checkout to measure (repeatable)")
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument("--quick", action="store_true", help="five calls each way")
    opts = parser.parse_args(args)
    if opts.quick:
        opts.calls = 5
    if opts.calls < 1 or min(opts.words) < 0:
        parser.error("--calls must be at least 1 and --words at least 0")
    code_dirs = [Path(c).resolve() for c in opts.code] if opts.code else [ROOT]
    adapters = opts.adapter or ADAPTERS
    rows = [measure(a, w, opts.calls, d) for a in adapters for w in opts.words for d in code_dirs]
    print(render(rows))
    if opts.json:
        with open(opts.json, "w") as fh:
            json.dump({"workload": "W10 streamed answer", "rows": rows}, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
