"""W1 counted in instructions: what one turn costs, the same figure on a busy machine.

Timing a turn on a shared virtual machine swings by a third from one process to the next,
more than most changes to the per-turn path are worth. Callgrind (valgrind) counts the
instructions a process runs instead, and gives the same count again for the same code and
inputs in one invocation (between invocations it moved by up to 2 %: compare checkouts in
one). So for each configuration and checkout this launches two processes under callgrind,
one making A timed runs of the W1 loop at N turns, the other B (after the same warm-up runs),
and reports `(instructions of B - instructions of A) / ((B - A) * N)`: the instructions per
turn, start-up, imports and warm-up cancelled out.

The runs are those of `benchmarks/w1_child.py` (the same workflows, checked for N model calls
and N - 1 tool calls), with the collector off once warmed up, as the harness's timed runs
at N = 200 see no collection (each starts after a `gc.collect()` and makes fewer objects than
its threshold). Instructions are not time: a system call or a cache miss costs far more than
its count says, so a change to the store's writes still needs `python -m benchmarks`.

    python -m benchmarks.turn_instructions                       # sync, stripped, default; N = 200
    python -m benchmarks.turn_instructions --config sync --n 20
    python -m benchmarks.turn_instructions --code ../before --code .     # before and after
    python -m benchmarks.turn_instructions --json out.json

Needs valgrind (`apt-get install valgrind`). `PYTHONHASHSEED` is fixed, so that string hashes
and set orders, and with them the counts, are the same in every launch.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks.import_cost import against_first, child_env, counted_per_turn
from benchmarks.w1_child import CODE_ENV, CONFIGS

ROOT = Path(__file__).resolve().parent.parent
SHOWN = ("sync", "stripped", "default")
"""The configurations counted unless `--config` says: those with the steadiest counts first
(the default path's store adds a checkpoint thread, whose timing moves its count by ~1 %)."""
WARMUPS = 3


def _child(config: str, n: int, runs: int) -> dict[str, Any]:
    """`runs` runs of `config` at `n` turns after the warm-up, in this process."""
    code = os.environ.get(CODE_ENV)
    if code:
        sys.path.insert(0, code)
    from benchmarks.turn_overhead import function_loop, tool_loop

    with tempfile.TemporaryDirectory(prefix="w1-instructions-") as tmp:
        os.environ["THENA_NB_STORE"] = os.path.join(tmp, "runs.sqlite3")
        if config == "stripped":
            wf = tool_loop(n)

            async def all_runs() -> list[Any]:
                for _ in range(WARMUPS):
                    await wf.arun("go", store=False)
                with _collector_off():
                    return [await wf.arun("go", store=False) for _ in range(runs)]

            done = asyncio.run(all_runs())
        else:
            wf = function_loop(n, asynchronous=config == "async")
            store: Any = None if config == "default" else False
            for _ in range(WARMUPS):
                wf.run("go", store=store)
            with _collector_off():
                done = [wf.run("go", store=store) for _ in range(runs)]
    for run in done:
        if (run.usage.model_calls, run.usage.tool_calls) != (n, n - 1):
            raise AssertionError(f"{config} N={n}: {run.usage.model_calls} model calls")
    return {"config": config, "n": n, "runs": runs, "model_calls": n, "tool_calls": n - 1}


@contextlib.contextmanager
def _collector_off() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def per_turn(config: str, n: int, code_dir: Path, runs: tuple[int, int]) -> dict[str, Any]:
    """The instructions one turn of `config` at `n` turns costs with `code_dir`'s thena_nb.

    Raises:
        SystemExit: valgrind is not installed.
    """
    env = child_env(code_dir)
    env[CODE_ENV] = str(code_dir)
    env["PYTHONHASHSEED"] = "0"
    args = [sys.executable, "-m", "benchmarks.turn_instructions", "--child", config]
    counts, per = counted_per_turn(args, env, n, runs)
    return {
        "config": config,
        "n": n,
        "code": str(code_dir),
        "runs": list(runs),
        "instructions": counts,
        "per_turn": per,
    }


def render(rows: list[dict[str, Any]]) -> str:
    """The rows as a text table; beside each checkout after the first, the change."""
    lines = [f"{'configuration':<14} {'N':>6} {'instructions/turn':>18}  code"]
    first: dict[Any, float] = {}
    for r in rows:
        change = against_first(first, (r["config"], r["n"]), r["per_turn"], 1)
        lines.append(f"{r['config']:<14} {r['n']:>6} {r['per_turn']:>18,.0f}  {r['code']}{change}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Count, print a table and optionally write JSON (or, with `--child`, be one launch)."""
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--child"]:
        if len(args) != 4 or args[1] not in CONFIGS:
            raise SystemExit(f"usage: --child {{{','.join(CONFIGS)}}} N RUNS")
        print(json.dumps(_child(args[1], int(args[2]), int(args[3]))))
        return 0
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--config", action="append", choices=list(CONFIGS), help="repeatable")
    parser.add_argument("--n", type=int, default=200, help="turns per run (200)")
    parser.add_argument(
        "--runs", type=int, nargs=2, default=(1, 5), metavar=("A", "B"), help="(1 5)"
    )
    parser.add_argument("--code", action="append", help="a checkout to count (repeatable)")
    parser.add_argument("--json", help="also write the figures to this file")
    opts = parser.parse_args(args)
    a, b = opts.runs
    if not 0 <= a < b or opts.n < 1:
        parser.error("--runs needs 0 <= A < B, and --n at least 1")
    if shutil.which("valgrind") is None:
        raise SystemExit("counting instructions needs valgrind: apt-get install valgrind")
    code_dirs = [Path(c).resolve() for c in opts.code] if opts.code else [ROOT]
    rows = [
        per_turn(config, opts.n, code_dir, (a, b))
        for config in opts.config or SHOWN
        for code_dir in code_dirs
    ]
    print(render(rows))
    if opts.json:
        with open(opts.json, "w") as fh:
            json.dump({"workload": "W1 instructions", "rows": rows}, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
