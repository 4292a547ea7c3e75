"""One W1 configuration (or one peer) at one N, in a process of its own; prints JSON.

    python -m benchmarks.w1_child CONFIG N REPEATS [--back-to-back]

CONFIG is one of `CONFIGS` (thena_nb), `floor` (the loop by hand, `floor_loop.py`) or
`peer:NAME` (a name from `peers.PEERS`). The child
runs a few untimed warm-up runs, then REPEATS timed runs, each after a `gc.collect()`; it times
every run with `time.process_time()` (CPU of the whole process, the store's writer thread
included) and `time.perf_counter()` (wall), and checks every run made exactly N model calls
and N - 1 tool calls. It prints one JSON object on stdout:
`{"config", "n", "cpu_s": [...], "wall_s": [...], "model_calls", "tool_calls", ...}`.

The collection before each run leaves the processor's caches cold, as a run started from a
notebook cell finds them; `--back-to-back` times each run straight after the one before
instead, as runs in a loop or an experiment go (`"between_runs"` in the JSON says which).

`THENA_NB_BENCH_CODE=/path/to/a/checkout` makes the child import thena_nb from there (the
harness itself stays this one), to measure another branch's code with the same harness.
The default path's SQLite store is a file in a temporary directory (`THENA_NB_STORE`),
removed at the end; after the runs the child opens it and checks the last run's N turns.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

CONFIGS = {
    "default": "sync FunctionModel, rescue on, default SQLite store, wf.run",
    "sync": "sync FunctionModel, rescue on, no store, wf.run",
    "async": "async FunctionModel, rescue on, no store, wf.run",
    "stripped": "ScriptedModel, rescue off, no store, await wf.arun",
}
"""thena_nb's configurations, default path first."""
FLOOR = "floor"
"""W1 by hand, no framework (`benchmarks.floor_loop`): the floor the default path is
measured against."""
CODE_ENV = "THENA_NB_BENCH_CODE"
BACK_TO_BACK = "--back-to-back"
_collect_between = True
"""`gc.collect()` before each timed run (`BACK_TO_BACK` turns it off)."""


def _warmups(repeats: int) -> int:
    """Untimed runs first: imports, caches, the first run's set-up (one for a short test)."""
    return 1 if repeats < 5 else max(2, min(10, repeats // 5))


def _ours(config: str, n: int, repeats: int) -> dict[str, Any]:
    from benchmarks.turn_overhead import function_loop, tool_loop

    stripped = config == "stripped"
    wf = tool_loop(n) if stripped else function_loop(n, asynchronous=config == "async")
    store: Any = None if config == "default" else False
    last: list[Any] = []

    def check(run: Any) -> None:
        usage = run.usage
        if (usage.model_calls, usage.tool_calls) != (n, n - 1) or run.output != "done":
            raise AssertionError(f"{config} N={n}: {usage.model_calls}/{usage.tool_calls} calls")
        last[:] = [run]

    if config == "stripped":

        async def all_runs() -> tuple[list[float], list[float]]:
            async def one() -> None:
                check(await wf.arun("go", store=False))

            return await _timed_async(one, repeats)

        cpus, walls = asyncio.run(all_runs())
    else:
        cpus, walls = _timed(lambda: check(wf.run("go", store=store)), repeats)
    out: dict[str, Any] = {"model_calls": n, "tool_calls": n - 1}
    if config == "default":
        out["stored_turns"] = _stored_turns(last[0].run_id)
        if out["stored_turns"] != n:
            raise AssertionError(f"the store holds {out['stored_turns']} turns, not {n}")
    return {"cpu_s": cpus, "wall_s": walls, **out}


def _stored_turns(run_id: str) -> int:
    from thena_nb.store import SqliteRunStore

    with SqliteRunStore.from_path(os.environ["THENA_NB_STORE"]) as store:
        return len(store.load(run_id).turns)


def _timed(run: Callable[[], None], repeats: int) -> tuple[list[float], list[float]]:
    for _ in range(_warmups(repeats)):
        run()
    cpus, walls = [], []
    for _ in range(repeats):
        if _collect_between:
            gc.collect()
        w0, c0 = time.perf_counter(), time.process_time()
        run()
        cpus.append(time.process_time() - c0)
        walls.append(time.perf_counter() - w0)
    return cpus, walls


async def _timed_async(run: Callable[[], Any], repeats: int) -> tuple[list[float], list[float]]:
    for _ in range(_warmups(repeats)):
        await run()
    cpus, walls = [], []
    for _ in range(repeats):
        if _collect_between:
            gc.collect()
        w0, c0 = time.perf_counter(), time.process_time()
        await run()
        cpus.append(time.process_time() - c0)
        walls.append(time.perf_counter() - w0)
    return cpus, walls


def _peer(name: str, n: int, repeats: int) -> dict[str, Any]:
    from benchmarks.peers import PEERS

    peer = next((p for p in PEERS if p.name == name), None)
    if peer is None:
        raise SystemExit(f"unknown peer {name!r}; choose from {', '.join(p.name for p in PEERS)}")
    runner = peer.build(n)
    counts: list[tuple[int, int]] = []

    async def one() -> None:
        counts.append(await runner())  # raises unless exactly n and n - 1 calls

    async def all_runs() -> tuple[list[float], list[float]]:
        # A peer's warm-up is one run: their runs at large N take seconds.
        await one()
        return await _timed_async(one, repeats) if repeats else ([], [])

    cpus, walls = asyncio.run(all_runs())
    model_calls, tool_calls = counts[-1]
    return {
        "cpu_s": cpus,
        "wall_s": walls,
        "model_calls": model_calls,
        "tool_calls": tool_calls,
        "versions": peer.versions(),
    }


def _floor(n: int, repeats: int) -> dict[str, Any]:
    """The loop by hand (`floor_loop.floor_run`) on an SQLite file of its own."""
    from benchmarks.floor_loop import connect, floor_run

    with tempfile.TemporaryDirectory(prefix="w1-floor-") as tmp:
        conn = connect(os.path.join(tmp, "floor.sqlite3"))

        def one() -> None:
            floor_run(conn, n)

        try:
            cpus, walls = _timed(one, repeats)
        finally:
            conn.close()
    return {"cpu_s": cpus, "wall_s": walls, "model_calls": n, "tool_calls": n - 1}


def measure(config: str, n: int, repeats: int) -> dict[str, Any]:
    """`repeats` timed runs of `config` at `n` turns, in this process."""
    if config.startswith("peer:"):
        out = _peer(config.removeprefix("peer:"), n, repeats)
    elif config == FLOOR:
        out = _floor(n, repeats)
    elif config in CONFIGS:
        with tempfile.TemporaryDirectory(prefix="w1-store-") as tmp:
            os.environ["THENA_NB_STORE"] = os.path.join(tmp, "runs.sqlite3")
            out = _ours(config, n, repeats)
        import thena_nb

        out["thena_nb"] = os.path.dirname(os.path.dirname(os.path.abspath(thena_nb.__file__)))
    else:
        choices = ", ".join([*CONFIGS, FLOOR])
        raise SystemExit(f"unknown configuration {config!r}; choose from {choices}")
    between = "gc.collect" if _collect_between else "nothing"
    return {"config": config, "n": n, "repeats": repeats, "between_runs": between, **out}


def main(argv: list[str] | None = None) -> int:
    """Parse `CONFIG N REPEATS [--back-to-back]`, measure, print the JSON object."""
    global _collect_between
    args = sys.argv[1:] if argv is None else argv
    flags = [a for a in args if a.startswith("--")]
    args = [a for a in args if not a.startswith("--")]
    if len(args) != 3 or any(f != BACK_TO_BACK for f in flags):
        raise SystemExit(f"usage: python -m benchmarks.w1_child CONFIG N REPEATS [{BACK_TO_BACK}]")
    _collect_between = not flags
    code = os.environ.get(CODE_ENV)
    if code:
        sys.path.insert(0, code)
    result = measure(args[0], int(args[1]), int(args[2]))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
