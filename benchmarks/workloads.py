"""The workloads `python -m benchmarks` runs: W1 in child processes, W2 and W5 in process, the
others as scripts.

- W1 per-turn cost of a tool loop: thena_nb's default path, then lighter configurations,
  then every installed peer (`peers.PEERS`), each configuration and N in processes of its
  own (`benchmarks.w1`, `benchmarks.w1_child`); CPU and wall medians, peer ÷ default ratios.
- W2 parallel: two branches whose models take 100 ms each; wall time against 100 ms.
- W5 memory: bytes kept per recorded turn of a 10,000-turn run, beyond the model's own text.
- W3 notebook views, W4 store, W6 rescue throughput, W7 run diffs, W12 a run's page, W13
  opening a stored run, W14 re-running a stored experiment, W15 the default path against
  the floor loop, W16 experiments against their floor: their scripts, run as subprocesses.
"""

from __future__ import annotations

import asyncio
import gc
import json
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.turn_overhead import add
from thena_nb import Agent, Workflow, loop, parallel, until_answered
from thena_nb.models import ScriptedModel, reply

__all__ = ["SCRIPTS", "Script", "run_script", "w1", "w2", "w5"]

HERE = Path(__file__).resolve().parent

OURS = "thena_nb"
PEER_LIMIT_S = 30.0
"""A peer whose one run at N=2,000 would take longer than this is measured at 20 and 200 only."""


# -- W1 --------------------------------------------------------------------------------------


def w1(
    *, quick: bool, log: Callable[[str], None] = print, code: str | None = None, peers: bool = True
) -> dict[str, Any]:
    """W1 on thena_nb's configurations and every installed peer, each in its own process
    (`benchmarks.w1`)."""
    from benchmarks import w1 as w1_module

    return w1_module.w1(quick=quick, log=log, code=code, peers=peers)


# -- W2 --------------------------------------------------------------------------------------


def two_branches(delay: float) -> Workflow:
    """A workflow of one parallel block whose two branches' models each take `delay` s."""
    a = Agent("A", model=ScriptedModel(["a"], delay=delay))
    b = Agent("B", model=ScriptedModel(["b"], delay=delay))
    return Workflow("parallel-bench", [parallel([a, b])])


def w2(*, quick: bool, delay: float = 0.1) -> dict[str, Any]:
    """W2: wall time of two 100 ms branches against the 100 ms ideal."""
    wf = two_branches(delay)
    repeats = 5 if quick else 30

    async def runs() -> list[float]:
        await wf.arun("go", store=False)  # warm-up
        out = []
        for _ in range(repeats):
            gc.collect()
            t0 = time.perf_counter()
            run = await wf.arun("go", store=False)
            out.append(time.perf_counter() - t0)
            assert run.usage.model_calls == 2 and len(run.turns) == 2, run.usage
        return out

    walls = asyncio.run(runs())
    median = statistics.median(walls)
    over = median / delay - 1
    return {
        "workload": "W2",
        "title": "parallel: two branches of 100 ms each",
        "ideal_ms": delay * 1e3,
        "median_ms": median * 1e3,
        "best_ms": min(walls) * 1e3,
        "worst_ms": max(walls) * 1e3,
        "overhead_fraction": over,
        "repeats": repeats,
        "checks": [
            {
                "target": "within 10% of the 100 ms ideal (median wall)",
                "value": over,
                "limit": 0.10,
                "ok": over <= 0.10,
            }
        ],
        "notes": [],
    }


# -- W5 --------------------------------------------------------------------------------------


def _memory_loop(n: int, text_chars: int) -> tuple[Workflow, ScriptedModel]:
    """A tool loop of `n` turns whose every reply carries `text_chars` of model text."""
    replies: list[Any] = []
    for i in range(n - 1):
        text = f"step {i}: ".ljust(text_chars, "x")
        replies.append(reply.calls([("add", {"a": i, "b": 1})], text=text))
    replies.append("done".ljust(text_chars, "x"))
    model = ScriptedModel(replies)
    agent = Agent("Calc", model=model, tools=[add], rescue=False)
    wf = Workflow("memory", [loop(steps=[agent], until=until_answered, max_iterations=n)])
    return wf, model


def _kept_bytes(turns: int, text_chars: int) -> tuple[float, float, float]:
    """Bytes per turn a finished `turns`-turn run holds beyond its script (the model's
    text), its peak, and the scripted model's request log per turn."""
    wf, model = _memory_loop(turns, text_chars)
    gc.collect()
    tracemalloc.start()
    try:
        base, _ = tracemalloc.get_traced_memory()
        run = asyncio.run(wf.arun("go", store=False))
        gc.collect()
        with_log, peak = tracemalloc.get_traced_memory()
        model.requests.clear()
        gc.collect()
        kept, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert run.usage.model_calls == turns and len(run.turns) == turns, run.usage
    assert all(t.request is not None for t in run.turns)  # each turn keeps what was sent
    return (kept - base) / turns, (peak - base) / turns, (with_log - kept) / turns


def _store_bytes(turns: int, text_chars: int) -> float:
    """Bytes per turn of an SQLite store file holding one finished `turns`-turn run."""
    from thena_nb.store import SqliteRunStore

    wf, _ = _memory_loop(turns, text_chars)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "runs.sqlite3"
        with SqliteRunStore.from_path(path) as store:
            run = wf.run("go", store=store)
            loaded = store.load(run.run_id)
        assert loaded.request_of(turns - 1) == run.request_of(turns - 1)
        size = sum(p.stat().st_size for p in Path(tmp).iterdir())
    return size / turns


def w5(
    *, quick: bool, turns: int = 10_000, text_chars: int = 200, store_turns: int = 2_000
) -> dict[str, Any]:
    """W5: bytes kept per recorded turn of a `turns`-turn run, beyond the model's own text;
    the same at `store_turns` turns, and the SQLite file's bytes per turn there.

    The script (every reply and its text) is built before tracing starts, so the model's
    text is not counted; what is counted is everything the run allocated and still holds
    once it has finished: history messages, turns (with the record of what each model was
    sent), tool calls and results, the report tree. The scripted model's own log of
    requests is dropped before the count (a real model keeps none). The store file holds
    the model's text three times (the turn, its messages, the final history), so its
    figure beyond the text subtracts `3 * text_chars` per turn.
    """
    small, _ = _memory_loop(20, text_chars)
    asyncio.run(small.arun("go", store=False))  # warm-up: lazy imports and schema caches
    per_turn, peak, log = _kept_bytes(turns, text_chars)
    at_store_turns, _, _ = _kept_bytes(store_turns, text_chars)
    store = _store_bytes(store_turns, text_chars)
    beyond = store - 3 * text_chars
    return {
        "workload": "W5",
        "title": f"memory per recorded turn ({turns:,} turns)",
        "turns": turns,
        "model_text_chars_per_turn": text_chars,
        "bytes_per_turn": per_turn,
        "peak_bytes_per_turn": peak,
        "request_log_bytes_per_turn": log,
        "store_turns": store_turns,
        "bytes_per_turn_at_store_turns": at_store_turns,
        "store_bytes_per_turn": store,
        "store_bytes_per_turn_beyond_text": beyond,
        "checks": [
            {
                "target": "under 4 KB per recorded turn beyond the model's text",
                "value": per_turn,
                "limit": 4096.0,
                "ok": per_turn < 4096,
            },
            {
                "target": f"N={store_turns:,}: under 4 KB per recorded turn beyond the text",
                "value": at_store_turns,
                "limit": 4096.0,
                "ok": at_store_turns < 4096,
            },
            {
                "target": f"N={store_turns:,}: SQLite file under 4 KB per turn beyond the text",
                "value": beyond,
                "limit": 4096.0,
                "ok": beyond < 4096,
            },
        ],
        "notes": [
            "the scripted model's request log is not counted",
            f"SQLite file: {store:,.0f} B per turn in all, {3 * text_chars} B of it the "
            f"model's text (kept three times)",
        ],
    }


# -- W3, W4, W6: scripts ----------------------------------------------------------------------


@dataclass(frozen=True)
class Script:
    """A benchmark script run as a subprocess; `workload` is its W-number."""

    workload: str
    path: str
    title: str


SCRIPTS = [
    Script("W3", "notebook_views.py", "notebook views"),
    Script("W3", "stepper_render.py", "stepper rendering"),
    Script("W4", "store_cost.py", "run store"),
    Script("W6", "rescue_throughput.py", "rescue throughput"),
    Script("W7", "diff_cost.py", "run diffs"),
    Script("W8", "import_cost.py", "import and first run"),
    Script("W9", "adapter_turn.py", "W1 through the real adapters"),
    Script("W10", "stream_reply.py", "a streamed answer"),
    Script("W11", "foreign_step.py", "a pydantic-ai agent as a step"),
    Script("W12", "page_size.py", "a run's page: bytes per turn and time"),
    Script("W13", "run_load.py", "opening a stored run (Run.load)"),
    Script("W14", "stored_experiment.py", "re-running a stored experiment (all reused)"),
    Script("W15", "floor_loop.py", "the default path against W1's loop by hand (the floor)"),
    Script("W16", "experiment_floor.py", "experiments against the same runs by hand"),
]


def run_script(script: Script, *, quick: bool, timeout: float = 1800) -> dict[str, Any]:
    """Run one script (with `--quick` when quick); take its JSON if it writes one (`--json`),
    else its printed table as text."""
    path = HERE / script.path
    out: dict[str, Any] = {"workload": script.workload, "title": script.title, "script": path.name}
    if not path.exists():
        out.update(status="missing", note=f"benchmarks/{path.name} is not there yet")
        return out
    takes_json = '"--json"' in path.read_text()
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / "out.json"
        cmd = [sys.executable, str(path)]
        if quick:
            cmd.append("--quick")
        if takes_json:
            cmd += ["--json", str(target)]
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(
                cmd, capture_output=True, text=True, timeout=timeout, cwd=HERE.parent
            )
        except subprocess.TimeoutExpired:
            out.update(status="failed", note=f"no result within {timeout:.0f} s")
            return out
        out["seconds"] = time.perf_counter() - t0
        out["returncode"] = proc.returncode
        out["stdout"] = proc.stdout
        if proc.returncode != 0:
            err = proc.stderr.strip().splitlines()
            out.update(status="failed", note=err[-1] if err else f"exit code {proc.returncode}")
            return out
        out["status"] = "ran"
        if takes_json and target.exists():
            out["json"] = json.loads(target.read_text())
    return out
