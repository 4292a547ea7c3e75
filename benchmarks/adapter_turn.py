"""W1 through the real adapters: what a turn costs the client with the SDK on the wire.

    python -m benchmarks.adapter_turn                        # both adapters, N = 1, 20, 200
    python -m benchmarks.adapter_turn --adapter openai --n 200 --runs 3
    python -m benchmarks.adapter_turn --store none           # without the SQLite store
    python -m benchmarks.adapter_turn --notebook             # each run as a notebook cell's
    python -m benchmarks.adapter_turn --experiment --runs 200 --n 3   # wf.map, 20 at once
    python -m benchmarks.adapter_turn --code ../before --code .     # before and after
    python -m benchmarks.adapter_turn --json out.json
    python benchmarks/adapter_turn.py --quick                # N = 1 and 20, two runs each
    python -m benchmarks.adapter_turn --instructions 1 4 --code ../before --code .

The W1 loop (N model calls, N - 1 tool calls) with `OpenAICompatModel` or `AnthropicModel`
as the agent's model, against `benchmarks/_api_server.py` on 127.0.0.1: the official SDK
sends every request over HTTP and parses every answer, as it does against Ollama, vLLM or
Anthropic's API. The default path otherwise: rescue on, the default SQLite store (a file in a
temporary directory), `wf.run`. With `--notebook` each `wf.run()` is called under a running
event loop, as in a Jupyter cell, which runs it on a fresh loop of its own (new connections
each run); with `--experiment`, RUNS cases go through one `wf.map(cases,
concurrency=EXPERIMENT_CONCURRENCY)`, timed as a whole. Each adapter and N runs in a process
of its own
(`--child ADAPTER N RUNS STORE MODE`) beside the server's process, so that only the client's work
is counted: one untimed run, then RUNS runs, each after a `gc.collect()`, timed with
`time.process_time()` (CPU of the whole client process). A figure is the median over the
runs, in µs of CPU per turn (per run at N = 1). Every run is checked for N model calls and
N - 1 tool calls, and the server counts the connections the client opened.

With `--instructions A B` each figure is counted instead of timed, as
`benchmarks.turn_instructions` counts W1: the client's process runs under callgrind
(valgrind) twice, making A and then B runs after the same warm-up with the collector off
(mode `counted`), and the figure is
(instructions of B - instructions of A) / ((B - A) * N), start-up and warm-up cancelled out.
The server is a process of its own, not counted. A launch's count moves with how the
client's loop meets the server's answers, by about a million instructions: two counts of one
checkout at N = 1 (runs 1 and 3) differed by 9.5 %, so count at N = 20 or more (a fraction
of a percent there), or with more runs.

A turn here costs far more than the `FunctionModel` turn W1 times: the SDK builds an HTTP
request and parses a JSON answer. A request carries the whole history, which the SDK encodes
and sends (the adapter maps only the messages new since the run's last request), so the
per-turn cost grows with N.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import warnings
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file, as `python -m benchmarks` runs W9
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.import_cost import against_first, child_env, child_row, instructions_of

ROOT = Path(__file__).resolve().parent.parent
ADAPTERS = ("openai", "anthropic")
MODES = ("script", "notebook", "experiment", "counted")
"""How the child calls its runs; `counted` is `script` with the collector off after one
collection, as `--instructions` counts them (a full collection of a heap that holds an SDK
costs more instructions than a turn, and would be counted with each run)."""
EXPERIMENT_CONCURRENCY = 20
"""Runs in flight at once in `--experiment` (`wf.map(..., concurrency=...)`)."""
CODE_ENV = "THENA_NB_BENCH_CODE"


def _model(adapter: str, port: int) -> Any:
    if adapter == "openai":
        from thena_nb.models.openai_compat import OpenAICompatModel

        model: Any = OpenAICompatModel(
            "bench-model", base_url=f"http://127.0.0.1:{port}/v1", api_key="sk-bench"
        )
        model.provider = "openai"  # priced as OpenAI's (an unknown model: no price, no warning)
        return model
    from thena_nb.models.anthropic import AnthropicModel

    return AnthropicModel(
        "bench-model", api_key="sk-ant-bench", base_url=f"http://127.0.0.1:{port}"
    )


def _connections(port: int) -> int:
    """The connections the server accepted before this question (asked on one more)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/connections", timeout=10) as answer:
        return int(json.load(answer)["connections"]) - 1


def _child(adapter: str, n: int, runs: int, store_name: str, mode: str) -> dict[str, Any]:
    """`runs` timed runs of W1 at `n` turns through `adapter`, in this process, each called
    as a script calls it (`mode="script"`) or as a notebook cell does (`"notebook"`)."""
    code = os.environ.get(CODE_ENV)
    if code:
        sys.path.insert(0, code)
    from thena_nb import Agent, Workflow, loop, tool, until_answered

    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    server = subprocess.Popen(
        [sys.executable, "-m", "benchmarks._api_server", str(n)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        with tempfile.TemporaryDirectory(prefix="adapter-turn-") as tmp:
            os.environ["THENA_NB_STORE"] = os.path.join(tmp, "runs.sqlite3")
            store: Any = None if store_name == "default" else False
            agent = Agent("Calc", model=_model(adapter, port), tools=[add])
            wf = Workflow("bench", [loop(steps=[agent], until=until_answered, max_iterations=n)])

            async def cell() -> Any:
                return wf.run("go", store=store)  # blocks the running loop, as a cell does

            def one() -> Any:  # (an experiment's warm-up is a plain run)
                return asyncio.run(cell()) if mode == "notebook" else wf.run("go", store=store)

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # an unpriced model's warning, once
                _check(one(), n)
            before = _connections(port)
            cpus, walls = [], []
            if mode == "counted":
                gc.collect()
                gc.disable()
            for _ in range(1 if mode == "experiment" else runs):
                if mode != "counted":
                    gc.collect()
                c0, w0 = time.process_time(), time.perf_counter()
                if mode == "experiment":
                    cases = [f"case {i}" for i in range(runs)]
                    frame = wf.map(cases, concurrency=EXPERIMENT_CONCURRENCY, store=store).frame()
                else:
                    run = one()
                cpus.append(time.process_time() - c0)
                walls.append(time.perf_counter() - w0)
                if mode == "experiment":
                    _check_rows(frame, runs, n)
                else:
                    _check(run, n)
            opened = _connections(port) - before - 1  # (the first question's own)
    finally:
        server.kill()
        server.wait()
    turns = n * (runs if mode == "experiment" else 1)
    per = [c / turns * 1e6 for c in cpus]
    return {
        "adapter": adapter,
        "n": n,
        "store": store_name,
        "mode": mode,
        "runs": runs,
        "cpu_us_per_turn": per,
        "median_us": statistics.median(per) if per else 0.0,  # (no runs: a count's base)
        "wall_s": walls,
        "connections_per_run": opened / runs if runs else 0.0,
    }


def _check(run: Any, n: int) -> None:
    usage = run.usage
    if (usage.model_calls, usage.tool_calls) != (n, n - 1) or run.output != "done":
        raise AssertionError(
            f"N={n}: {usage.model_calls} model calls, {usage.tool_calls} tool calls, "
            f"status {run.status!r}, error {run.error!r}"
        )


def _check_rows(frame: Any, runs: int, n: int) -> None:
    finished = frame[(frame["status"] == "finished") & (frame["turns"] == n)]
    if len(finished) != runs or (frame["tool_calls"] != n - 1).any():
        raise AssertionError(f"{len(finished)} of {runs} runs finished with {n} turns")


def measure(
    adapter: str, n: int, runs: int, store: str, code_dir: Path, mode: str = "script"
) -> dict[str, Any]:
    """One child process's figures for `adapter` at `n` turns with `code_dir`'s thena_nb."""
    args = [adapter, str(n), str(runs), store, mode]
    return child_row("benchmarks.adapter_turn", args, code_dir, ROOT)


def count(
    adapter: str, n: int, runs: tuple[int, int], store: str, code_dir: Path
) -> dict[str, Any]:
    """Instructions per turn of `adapter` at `n` turns with `code_dir`'s thena_nb: two
    launches of the child under callgrind, making `runs[0]` and `runs[1]` runs.

    Raises:
        SystemExit: valgrind is not installed.
    """
    env = child_env(code_dir)
    env[CODE_ENV] = str(code_dir)
    env["PYTHONHASHSEED"] = "0"
    args = [sys.executable, "-m", "benchmarks.adapter_turn", "--child", adapter, str(n)]
    # One launch first, not counted, writes the bytecode (as `turn_instructions` does).
    subprocess.run(
        [*args, "1", store, "counted"], env=env, cwd=ROOT, check=True, capture_output=True
    )
    counts = []
    for r in runs:
        found = instructions_of([*args, str(r), store, "counted"], env, str(ROOT))
        if found is None:
            raise SystemExit("counting instructions needs valgrind: apt-get install valgrind")
        counts.append(found)
    (a, b), (ca, cb) = runs, counts
    per = (cb - ca) / ((b - a) * n)
    return {
        "adapter": adapter,
        "n": n,
        "store": store,
        "mode": "instructions",
        "runs": list(runs),
        "instructions": counts,
        "per_turn": per,
        "code": str(code_dir),
    }


def render_counts(rows: list[dict[str, Any]]) -> str:
    """`count`'s rows as a text table; beside each checkout after the first, the change."""
    lines = [f"{'adapter':<10} {'N':>5} {'instructions/turn':>18}  code"]
    first: dict[Any, float] = {}
    for r in rows:
        change = against_first(first, (r["adapter"], r["n"]), r["per_turn"], 1)
        lines.append(f"{r['adapter']:<10} {r['n']:>5} {r['per_turn']:>18,.0f}  {r['code']}{change}")
    return "\n".join(lines)


def render(rows: list[dict[str, Any]]) -> str:
    """The rows as a text table; beside each checkout after the first, the change."""
    head = f"{'adapter':<10} {'N':>5} {'CPU µs/turn':>12} {'runs/s':>8} {'connections/run':>16}"
    lines = [f"{head}  code"]
    first: dict[Any, float] = {}
    for r in rows:
        change = against_first(first, (r["adapter"], r["n"]), r["median_us"])
        lines.append(
            f"{r['adapter']:<10} {r['n']:>5} {r['median_us']:>12,.0f} {_rate(r):>8,.1f} "
            f"{r['connections_per_run']:>16.1f}  {r['code']}{change}"
        )
    return "\n".join(lines)


def _rate(row: dict[str, Any]) -> float:
    """Runs finished per second of wall time (an experiment's all at once)."""
    walls = row.get("wall_s") or [0.0]
    done = row["runs"] if row.get("mode") == "experiment" else 1
    return done / statistics.median(walls) if statistics.median(walls) > 0 else 0.0


def main(argv: list[str] | None = None) -> int:
    """Measure, print a table and optionally write JSON (or, with `--child`, be one child)."""
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--child"]:
        if (
            len(args) != 6
            or args[1] not in ADAPTERS
            or args[4] not in ("default", "none")
            or args[5] not in MODES
        ):
            raise SystemExit(
                f"usage: --child {{{','.join(ADAPTERS)}}} N RUNS {{default,none}} "
                f"{{{','.join(MODES)}}}"
            )
        print(json.dumps(_child(args[1], int(args[2]), int(args[3]), args[4], args[5])))
        return 0
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--adapter", action="append", choices=ADAPTERS, help="repeatable")
    parser.add_argument("--n", type=int, nargs="+", default=[1, 20, 200], help="(1 20 200)")
    parser.add_argument("--runs", type=int, default=5, help="timed runs per process (5)")
    parser.add_argument("--store", choices=("default", "none"), default="default")
    parser.add_argument("--notebook", action="store_true", help="call wf.run as a cell does")
    parser.add_argument(
        "--experiment", action="store_true", help="RUNS cases through one wf.map instead"
    )
    parser.add_argument("--code", action="append", help="a checkout to measure (repeatable)")
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument("--quick", action="store_true", help="N = 1 and 20, two runs each")
    parser.add_argument(
        "--instructions",
        type=int,
        nargs=2,
        metavar=("A", "B"),
        help="count instructions per turn under callgrind, A runs against B, instead of timing",
    )
    opts = parser.parse_args(args)
    if opts.quick:
        opts.n, opts.runs = [n for n in opts.n if n <= 20] or [1], 2
    if opts.runs < 1 or min(opts.n) < 1:
        parser.error("--runs and every --n must be at least 1")
    code_dirs = [Path(c).resolve() for c in opts.code] if opts.code else [ROOT]
    cases = [(a, n, d) for a in opts.adapter or ADAPTERS for n in opts.n for d in code_dirs]
    if opts.instructions is not None:
        low, high = opts.instructions
        if not 0 <= low < high or opts.notebook or opts.experiment:
            parser.error("--instructions needs 0 <= A < B, and counts script runs only")
        rows = [count(a, n, (low, high), opts.store, d) for a, n, d in cases]
        table, workload = render_counts(rows), "W9 instructions"
    else:
        mode = "experiment" if opts.experiment else "notebook" if opts.notebook else "script"
        rows = [measure(a, n, opts.runs, opts.store, d, mode) for a, n, d in cases]
        table, workload = render(rows), "W1 through the real adapters"
    print(table)
    if opts.json:
        with open(opts.json, "w") as fh:
            json.dump({"workload": workload, "rows": rows}, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
