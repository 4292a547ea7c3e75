"""The workloads `python -m benchmarks` runs: W1, W2 and W5 in process, the others as scripts.

- W1 per-turn overhead: thena_nb's tool loop (`turn_overhead.tool_loop`) and the same loop on
  every installed peer (`peers.PEERS`), interleaved round by round in one process so that a
  busy machine slows them alike; medians of wall and CPU time, and peer ÷ thena_nb ratios.
- W2 parallel: two branches whose models take 100 ms each; wall time against 100 ms.
- W5 memory: bytes kept per recorded turn of a 10,000-turn run, beyond the model's own text.
- W3 notebook views, W4 store, W6 rescue throughput, W7 run diffs: their scripts, run as
  subprocesses.
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.peers import PEERS, Peer, Runner
from benchmarks.turn_overhead import add, run_once, tool_loop
from thena_nb import Agent, Workflow, loop, parallel, until_answered
from thena_nb.models import ScriptedModel, reply

__all__ = ["SCRIPTS", "Script", "run_script", "w1", "w2", "w5"]

HERE = Path(__file__).resolve().parent

OURS = "thena_nb"
PEER_LIMIT_S = 30.0
"""A peer whose one run at N=2,000 would take longer than this is measured at 20 and 200 only."""


# -- W1 --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class W1Plan:
    """How many interleaved rounds each N gets, and how many runs of thena_nb per round."""

    n: int
    rounds: int
    ours_per_round: int
    peers: bool
    """Whether the peers run at this N at all."""
    peer_rounds: int


FULL_PLAN = [
    W1Plan(20, rounds=60, ours_per_round=5, peers=True, peer_rounds=60),
    W1Plan(200, rounds=12, ours_per_round=3, peers=True, peer_rounds=12),
    W1Plan(2000, rounds=6, ours_per_round=2, peers=True, peer_rounds=3),
]
QUICK_PLAN = [
    W1Plan(20, rounds=5, ours_per_round=3, peers=True, peer_rounds=5),
    W1Plan(200, rounds=3, ours_per_round=1, peers=False, peer_rounds=0),
    W1Plan(2000, rounds=2, ours_per_round=1, peers=False, peer_rounds=0),
]


@dataclass
class _Series:
    """One framework's samples at one N."""

    framework: str
    n: int
    runner: Runner | None = None
    status: str = "measured"
    note: str = ""
    walls: list[float] = field(default_factory=list)
    cpus: list[float] = field(default_factory=list)
    counts: tuple[int, int] | None = None

    async def sample(self) -> None:
        assert self.runner is not None
        gc.collect()
        w0, c0 = time.perf_counter(), time.process_time()
        counts = await self.runner()
        self.walls.append(time.perf_counter() - w0)
        self.cpus.append(time.process_time() - c0)
        self.counts = counts

    def fail(self, exc: BaseException) -> None:
        self.status = "error"
        self.note = f"{type(exc).__name__}: {exc}"
        self.runner = None

    def row(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "n": self.n,
            "framework": self.framework,
            "status": self.status,
            "note": self.note,
            "samples": len(self.walls),
        }
        if self.status == "measured" and self.walls:
            per_turn = 1e6 / self.n
            out.update(
                median_wall_us_per_turn=statistics.median(self.walls) * per_turn,
                best_wall_us_per_turn=min(self.walls) * per_turn,
                median_cpu_us_per_turn=statistics.median(self.cpus) * per_turn,
                median_run_s=statistics.median(self.walls),
                model_calls=self.counts[0] if self.counts else None,
                tool_calls=self.counts[1] if self.counts else None,
                verified=self.counts == (self.n, self.n - 1),
            )
        return out


def _ours(n: int) -> Runner:
    wf = tool_loop(n)

    async def run() -> tuple[int, int]:
        await run_once(wf, n)  # raises unless exactly n model calls and n - 1 tool calls
        return n, n - 1

    return run


def _too_slow(rows: dict[tuple[str, int], dict[str, Any]], name: str, n: int) -> str | None:
    """Why `name` is not run at `n`, judged from its 20- and 200-turn runs; else `None`."""
    small, mid = rows.get((name, 20)), rows.get((name, 200))
    if not small or not mid or "median_run_s" not in mid:
        return None
    growth = max(1.0, mid["median_wall_us_per_turn"] / small["median_wall_us_per_turn"])
    estimate = mid["median_run_s"] * (n / 200) * growth
    if estimate <= PEER_LIMIT_S:
        return None
    return (
        f"one run at N={n:,} would take about {estimate:,.0f} s (> {PEER_LIMIT_S:.0f} s; "
        f"µs/turn grew {growth:.1f}× from N=20 to N=200), so measured at N=20 and 200 only"
    )


async def _w1(plan: list[W1Plan], peers: list[Peer], log: Callable[[str], None]) -> dict[str, Any]:
    rows: dict[tuple[str, int], dict[str, Any]] = {}
    notes: list[str] = []
    present = []
    for peer in peers:
        missing = peer.missing()
        if missing:
            notes.append(
                f"{peer.name} skipped: not installed (needs {', '.join(missing)}; "
                f'pip install -e ".[bench]")'
            )
        else:
            present.append(peer)
    if present and not all(step.peers for step in plan):
        ns = ", ".join(f"{step.n:,}" for step in plan if step.peers)
        notes.append(f"quick run: the peers run at N={ns} only")
    for step in plan:
        series = [_Series(OURS, step.n, _ours(step.n))]
        for peer in present:
            s = _Series(peer.name, step.n)
            if not step.peers:
                s.status = "skipped"
            elif (reason := _too_slow(rows, peer.name, step.n)) is not None:
                s.status, s.note = "skipped", reason
            else:
                try:
                    s.runner = peer.build(step.n)
                except Exception as exc:  # a peer's API changed: report it, go on
                    s.fail(exc)
            series.append(s)
        log(f"W1 N={step.n:,}: " + ", ".join(s.framework for s in series if s.runner))
        # Warm-up: one run of each, not timed (imports, caches, first-call set-up).
        for s in series:
            if s.runner is not None:
                try:
                    w0 = time.perf_counter()
                    await s.runner()
                    if s.framework != OURS and time.perf_counter() - w0 > PEER_LIMIT_S:
                        s.status, s.runner = "skipped", None
                        s.note = f"one run took more than {PEER_LIMIT_S:.0f} s"
                except Exception as exc:
                    if s.framework == OURS:
                        raise
                    s.fail(exc)
        for r in range(step.rounds):
            for s in series:
                if s.runner is None:
                    continue
                if s.framework == OURS:
                    for _ in range(step.ours_per_round):
                        await s.sample()
                elif r < step.peer_rounds:
                    try:
                        await s.sample()
                    except Exception as exc:
                        s.fail(exc)
        ours = series[0].row()
        for s in series:
            row = s.row()
            if s is not series[0] and "median_wall_us_per_turn" in row:
                row["ratio_wall"] = row["median_wall_us_per_turn"] / ours["median_wall_us_per_turn"]
                row["ratio_cpu"] = row["median_cpu_us_per_turn"] / ours["median_cpu_us_per_turn"]
            rows[(s.framework, step.n)] = row
            if row["status"] != "measured" and row["note"]:
                notes.append(f"{s.framework} at N={step.n:,}: {row['note']}")
    return _w1_summary(plan, list(rows.values()), notes, [p.name for p in peers])


def _w1_summary(
    plan: list[W1Plan], rows: list[dict[str, Any]], notes: list[str], peer_names: list[str]
) -> dict[str, Any]:
    ours = {r["n"]: r for r in rows if r["framework"] == OURS}
    first, last = plan[0].n, plan[-1].n
    checks = []
    for n, r in ours.items():
        checks.append(
            {
                "target": f"N={n:,}: under 25 µs per turn (CPU)",
                "value": r["median_cpu_us_per_turn"],
                "limit": 25.0,
                "ok": r["median_cpu_us_per_turn"] < 25.0,
            }
        )
    for n, want in ((20, 10.0), (200, 30.0)):
        peers_at_n = [
            r for r in rows if r["n"] == n and r["framework"] != OURS and "ratio_cpu" in r
        ]
        if peers_at_n:
            fastest = min(peers_at_n, key=lambda r: r["median_cpu_us_per_turn"])
            checks.append(
                {
                    "target": f"N={n:,}: at least {want:.0f}× below the fastest peer "
                    f"({fastest['framework']}, CPU)",
                    "value": fastest["ratio_cpu"],
                    "limit": want,
                    "ok": fastest["ratio_cpu"] >= want,
                }
            )
    flat_wall = ours[last]["median_wall_us_per_turn"] / ours[first]["median_wall_us_per_turn"]
    flat_cpu = ours[last]["median_cpu_us_per_turn"] / ours[first]["median_cpu_us_per_turn"]
    checks.append(
        {
            "target": f"N={last:,} within 1.2× of N={first:,} (CPU µs/turn)",
            "value": flat_cpu,
            "limit": 1.2,
            "ok": flat_cpu <= 1.2,
        }
    )
    return {
        "workload": "W1",
        "title": "per-turn overhead of the tool loop",
        "frameworks": [OURS, *peer_names],
        "rows": rows,
        "flatness_wall": flat_wall,
        "flatness_cpu": flat_cpu,
        "checks": checks,
        "notes": notes,
    }


def w1(*, quick: bool, log: Callable[[str], None] = print) -> dict[str, Any]:
    """W1 on thena_nb and every installed peer, in this process."""
    return asyncio.run(_w1(QUICK_PLAN if quick else FULL_PLAN, PEERS, log))


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
