"""W16: experiments against a floor: many 3-turn runs with 50 ms model calls, all in flight.

Every run calls `lookup` twice and then answers (3 turns), each model call taking `L` (50
ms). The subjects, each in a process of its own, alternating round by round:

- `map_store`: `wf.map(inputs, concurrency=K)` with its default store (an SQLite file in a
  temporary directory, named by `THENA_NB_STORE`), on `experiment_scale.three_turns`.
- `map_no_store`: the same with `store=False`.
- `pydantic_evals`: pydantic-evals' `Dataset.evaluate(task, max_concurrency=K)` (its docs'
  call; `evaluate_sync`), the task the floor's run by hand with nothing stored: it keeps
  nothing of the runs but its report.
- `pydantic_evals_ai` (full runs, at most 1,000 cases; `--no-agent` leaves it out): the same
  with a pydantic-ai `Agent` as the task (a `FunctionModel`, async, `L` a call, and an async
  `lookup` tool), how a pydantic-ai user would evaluate an agent.
- `floor`: the runs by hand as asyncio tasks (a list of messages, the same replies and
  tool), each turn one SQLite `INSERT` of the turn as JSON into the open transaction, one
  commit per event-loop pass for every turn written in it (as the store batches them), each
  writer waiting for that commit; WAL, `synchronous=NORMAL`.

Each child makes a small warm-up experiment first (other inputs), then the timed one; it
reports wall and CPU time (`time.process_time`, every thread) and the growth of its resident
set per run: peak RSS (`ru_maxrss`) after the run minus the RSS (`/proc/self/statm`) before
it, divided by the runs (the same method for every subject). Figures are medians over the
rounds. Cases: 1,000 and 5,000, all in flight (K = cases); then R = 10,000 runs at K = 1,000
against the ideal wall time `ceil(R / K) * 3 * L` (1.5 s).

Targets (reported, not asserted): `map_store` no slower than `pydantic_evals` (wall) at
1,000 and 5,000 cases; R = 10,000 at K = 1,000 within 2x the ideal; memory per run no more
than pydantic-evals'.

    python benchmarks/experiment_floor.py               # 1,000 and 5,000 cases; R = 10,000
    python benchmarks/experiment_floor.py --quick       # 500 cases; R = 2,000 at K = 500
    python benchmarks/experiment_floor.py --cases 20 --scale-runs 40 --scale-concurrency 10
    python benchmarks/experiment_floor.py --profile /tmp/map.prof   # cProfile map_store, 1,000
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import math
import os
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.experiment_scale import REPLIES, SlowModel, lookup, three_turns

SUBJECTS = ("map_store", "map_no_store", "pydantic_evals", "floor")
SCALE_SUBJECTS = ("map_store", "pydantic_evals", "floor")
AGENT = ("pydantic_evals_ai",)
TURNS = 3
WARMUP_CASES = 20
_SCHEMA = "CREATE TABLE IF NOT EXISTS turns (run_id TEXT, turn INTEGER, body TEXT)"
_INSERT = "INSERT INTO turns (run_id, turn, body) VALUES (?, ?, ?)"
_LOOKUP = lookup.fn


# -- the floor ---------------------------------------------------------------------------------


class PassCommit:
    """One open transaction on `conn`; every turn written during a loop pass joins it, and
    one commit at the end of the pass wakes all their writers."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.waiters: list[asyncio.Future[None]] = []

    async def write(self, run_id: str, index: int, body: str) -> None:
        """Insert a turn and return once it is committed."""
        loop = asyncio.get_running_loop()
        if not self.waiters:
            self.conn.execute("BEGIN")
            loop.call_soon(self.commit)
        self.conn.execute(_INSERT, (run_id, index, body))
        done = loop.create_future()
        self.waiters.append(done)
        await done

    def commit(self) -> None:
        """Commit the pass's writes and wake their writers."""
        self.conn.execute("COMMIT")
        waiters, self.waiters = self.waiters, []
        for done in waiters:
            done.set_result(None)


def _as_dict(chosen: Any, number: int) -> dict[str, Any]:
    calls = [
        {"id": f"call-{number}", "name": c.name, "arguments": dict(c.arguments)}
        for c in chosen.tool_calls
    ]
    return {"role": "assistant", "content": chosen.text, "tool_calls": calls}


FLOOR_REPLIES = [_as_dict(chosen, i) for i, chosen in enumerate(REPLIES)]
"""`experiment_scale.REPLIES` as plain messages."""


def _reply(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The run's next reply by the tool results seen, as `SlowModel` decides it."""
    seen = sum(1 for m in messages if m["role"] == "tool")
    return dict(FLOOR_REPLIES[seen])


async def floor_run(batch: PassCommit | None, prompt: str, delay: float) -> str:
    """One 3-turn run by hand, each turn stored through `batch` (None: kept nowhere); its
    answer."""
    run_id = uuid.uuid4().hex
    messages: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
    for index in range(TURNS):
        await asyncio.sleep(delay)
        answer = _reply(messages)
        messages.append(answer)
        results = [
            {"role": "tool", "tool_call_id": c["id"], "content": _LOOKUP(**c["arguments"])}
            for c in answer["tool_calls"]
        ]
        messages.extend(results)
        if batch is not None:
            body = json.dumps({"index": index, "reply": answer, "results": results})
            await batch.write(run_id, index, body)
        if not results:
            break
    return str(messages[-1]["content"])


def floor_experiment(
    conn: sqlite3.Connection, inputs: list[str], concurrency: int, delay: float
) -> list[str]:
    """Every input as an asyncio task, at most `concurrency` at once; their answers."""

    async def main() -> list[str]:
        batch = PassCommit(conn)
        limit = asyncio.Semaphore(concurrency)

        async def one(prompt: str) -> str:
            async with limit:
                return await floor_run(batch, prompt, delay)

        return list(await asyncio.gather(*(one(p) for p in inputs)))

    return asyncio.run(main())


def connect(path: str) -> sqlite3.Connection:
    """The floor's connection: WAL, `synchronous=NORMAL`, explicit transactions."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute(_SCHEMA)
    return conn


# -- pydantic-evals ----------------------------------------------------------------------------


def _pydantic_evals(delay: float, agent: bool) -> tuple[Any, Any]:
    """`evaluate(inputs, concurrency) -> report` and `answers(report)`: pydantic-evals over
    the loop by hand (the floor's run, nothing stored), or over a pydantic-ai agent."""
    from pydantic_evals import Case, Dataset

    async def by_hand(question: str) -> str:
        return await floor_run(None, question, delay)

    task = _pydantic_ai_task(delay) if agent else by_hand

    def evaluate(inputs: list[str], concurrency: int) -> Any:
        dataset = Dataset(name="w16", cases=[Case(name=q, inputs=q) for q in inputs])
        return dataset.evaluate_sync(task, max_concurrency=concurrency, progress=False)

    def answers(report: Any) -> list[str]:
        if report.failures:
            raise AssertionError(f"pydantic-evals: {len(report.failures)} cases failed")
        return [str(c.output) for c in report.cases]

    return evaluate, answers


def _pydantic_ai_task(delay: float) -> Any:
    """The 3-turn loop as a pydantic-ai agent: a `FunctionModel` (async, `delay` a call)
    and an async `lookup` tool."""
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    async def model_fn(messages: list[Any], info: AgentInfo) -> ModelResponse:
        await asyncio.sleep(delay)
        seen = sum(1 for m in messages for p in m.parts if isinstance(p, ToolReturnPart))
        if seen < 2:
            return ModelResponse(parts=[ToolCallPart("lookup", {"q": "ab"[seen]})])
        return ModelResponse(parts=[TextPart("done")])

    async def lookup(q: str) -> str:
        """Look something up."""
        return f"found {q}"

    agent = Agent(FunctionModel(model_fn), tools=[lookup])

    async def task(question: str) -> str:
        result = await agent.run(question)
        return str(result.output)

    return task


# -- one subject in this process ---------------------------------------------------------------


def _subject(name: str, delay: float, tmp: str) -> tuple[Any, Any]:
    """`run(inputs, concurrency) -> result` for subject `name`, and `answers(result)`: each
    run's answer, checked after the timing."""
    if name == "floor":
        conn = connect(os.path.join(tmp, "floor.sqlite3"))
        return (lambda inputs, k: floor_experiment(conn, inputs, k, delay)), list
    if name in ("pydantic_evals", "pydantic_evals_ai"):
        return _pydantic_evals(delay, agent=name == "pydantic_evals_ai")
    if name not in ("map_store", "map_no_store"):
        raise SystemExit(f"unknown subject {name!r}; choose from {', '.join(SUBJECTS)}")
    os.environ["THENA_NB_STORE"] = os.path.join(tmp, "runs.sqlite3")
    store: Any = None if name == "map_store" else False

    def run(inputs: list[str], k: int) -> Any:
        wf = three_turns(SlowModel(delay))
        return wf.map(inputs, concurrency=k, store=store, progress=False)

    def answers(exp: Any) -> list[str]:
        frame = exp.frame()
        return ["done" if ok else "unfinished" for ok in frame["status"] == "finished"]

    return run, answers


def _rss_now_kb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1024


def measure(name: str, cases: int, concurrency: int, delay: float) -> dict[str, Any]:
    """One timed experiment of `cases` runs of subject `name`, after a small warm-up."""
    with tempfile.TemporaryDirectory(prefix="w16-") as tmp:
        run, answers_of = _subject(name, delay, tmp)
        warm = answers_of(run([f"warm-up {i}" for i in range(WARMUP_CASES)], WARMUP_CASES))
        assert warm == ["done"] * WARMUP_CASES, warm[:3]
        inputs = [f"question {i}" for i in range(cases)]
        gc.collect()
        rss0 = _rss_now_kb()
        c0, w0 = time.process_time(), time.perf_counter()
        result = run(inputs, concurrency)
        cpu, wall = time.process_time() - c0, time.perf_counter() - w0
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        answers = answers_of(result)
    if answers != ["done"] * cases:
        raise AssertionError(f"{name}: {sum(a == 'done' for a in answers)} of {cases} answered")
    return {"subject": name, "cases": cases, "concurrency": concurrency, "delay": delay,
            "wall_s": wall, "cpu_s": cpu, "rss_before_kb": rss0, "rss_peak_kb": peak,
            "kb_per_run": max(0.0, peak - rss0) / cases}  # fmt: skip


def _child(name: str, cases: int, concurrency: int, delay: float) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", name, str(cases), str(concurrency), str(delay)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{name} at {cases:,} cases failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


# -- rounds, table, targets --------------------------------------------------------------------


def rounds_of(
    subjects: tuple[str, ...], cases: int, concurrency: int, delay: float, rounds: int
) -> list[dict[str, Any]]:
    """Each subject `rounds` times in processes of its own, alternating; a row per subject
    with the medians."""
    parts: dict[str, list[dict[str, Any]]] = {s: [] for s in subjects}
    for _ in range(rounds):
        for name in subjects:
            parts[name].append(_child(name, cases, concurrency, delay))
    ideal = math.ceil(cases / concurrency) * TURNS * delay
    rows = []
    for name, got in parts.items():
        row: dict[str, Any] = {"subject": name, "cases": cases, "concurrency": concurrency,
                               "delay": delay, "rounds": rounds, "ideal_s": ideal}  # fmt: skip
        for key in ("wall_s", "cpu_s", "kb_per_run"):
            row[key] = statistics.median(p[key] for p in got)
        row["wall_over_ideal"] = row["wall_s"] / ideal if ideal else None
        rows.append(row)
    by = {r["subject"]: r for r in rows}
    for row in rows:
        for other, key in (("floor", "floor"), ("pydantic_evals", "evals")):
            if other in by:
                row[f"wall_over_{key}"] = row["wall_s"] / by[other]["wall_s"]
                row[f"cpu_over_{key}"] = row["cpu_s"] / by[other]["cpu_s"]
    return rows


def render(rows: list[dict[str, Any]]) -> str:
    """The table: per size and subject, medians and ratios to the floor and pydantic-evals."""
    head = (f"{'runs':>6} {'K':>6} {'subject':<17} {'wall s':>7} {'CPU s':>7} {'÷ideal':>7} "
            f"{'wall÷floor':>10} {'CPU÷floor':>9} {'wall÷evals':>10} {'CPU÷evals':>9} "
            f"{'KB/run':>7}")  # fmt: skip
    lines = [head]

    def x(v: float | None) -> str:
        return "" if v is None else f"{v:.2f}x"

    for r in rows:
        lines.append(
            f"{r['cases']:>6,} {r['concurrency']:>6,} {r['subject']:<17} {r['wall_s']:>7.2f} "
            f"{r['cpu_s']:>7.2f} {x(r['wall_over_ideal']):>7} {x(r.get('wall_over_floor')):>10} "
            f"{x(r.get('cpu_over_floor')):>9} {x(r.get('wall_over_evals')):>10} "
            f"{x(r.get('cpu_over_evals')):>9} {r['kb_per_run']:>7.1f}"
        )
    return "\n".join(lines)


def targets(sized: list[dict[str, Any]], scale: list[dict[str, Any]]) -> dict[str, bool]:
    """The issue's targets, judged on the medians (reported, never asserted)."""
    met: dict[str, bool] = {}
    for r in sized:
        if r["subject"] == "map_store" and "wall_over_evals" in r:
            met[f"{r['cases']:,} cases: map_store wall <= pydantic_evals"] = (
                r["wall_over_evals"] <= 1.0
            )
    largest = max((r["cases"] for r in sized), default=0)
    big = {r["subject"]: r for r in sized if r["cases"] == largest}
    if "map_store" in big and "pydantic_evals" in big:
        met[f"{largest:,} cases: map_store KB/run <= pydantic_evals"] = (
            big["map_store"]["kb_per_run"] <= big["pydantic_evals"]["kb_per_run"]
        )
    for r in scale:
        if r["subject"] == "map_store" and r["wall_over_ideal"] is not None:
            met[f"R={r['cases']:,} K={r['concurrency']:,}: map_store wall <= 2x ideal"] = (
                r["wall_over_ideal"] <= 2.0
            )
    return met


def _profile(cases: int, delay: float, path: str) -> None:
    import cProfile

    with tempfile.TemporaryDirectory(prefix="w16-profile-") as tmp:
        run, _ = _subject("map_store", delay, tmp)
        run([f"warm-up {i}" for i in range(WARMUP_CASES)], WARMUP_CASES)
        profiler = cProfile.Profile(time.thread_time)  # CPU time: a busy machine distorts less
        profiler.runcall(run, [f"question {i}" for i in range(cases)], cases)
    profiler.dump_stats(path)
    print(f"cProfile of map_store at {cases:,} cases written to {path}")


def main(argv: list[str] | None = None) -> int:
    """Measure, print the table and the targets, optionally write JSON."""
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--child"]:
        if len(args) != 5:
            raise SystemExit("usage: --child SUBJECT CASES CONCURRENCY DELAY")
        print(json.dumps(measure(args[1], int(args[2]), int(args[3]), float(args[4]))))
        return 0
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="500 cases; R=2,000 at K=500")
    parser.add_argument("--cases", type=int, action="append", help="(1,000 and 5,000)")
    parser.add_argument("--scale-runs", type=int, help="R (10,000; 0: skip)")
    parser.add_argument("--scale-concurrency", type=int, help="K for R (1,000)")
    parser.add_argument("--delay", type=float, default=0.05, help="seconds a model call (0.05)")
    parser.add_argument("--rounds", type=int, help="rounds per size (3; quick 1)")
    parser.add_argument("--no-agent", action="store_true", help="no pydantic_evals_ai subject")
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument("--profile", help="cProfile map_store at the (first) size, in process")
    opts = parser.parse_args(args)
    sizes = opts.cases or ([500] if opts.quick else [1000, 5000])
    scale_runs = (
        opts.scale_runs if opts.scale_runs is not None else (2000 if opts.quick else 10_000)
    )
    scale_k = opts.scale_concurrency or (500 if opts.quick else 1000)
    rounds = opts.rounds or (1 if opts.quick else 3)
    if min(sizes) < 1 or rounds < 1 or scale_runs < 0 or scale_k < 1:
        parser.error("--cases, --rounds and --scale-concurrency must be at least 1")
    if opts.profile:
        _profile(sizes[0], opts.delay, opts.profile)
        return 0
    agent = not (opts.quick or opts.no_agent)
    sized = [
        r
        for c in sizes
        for r in rounds_of(SUBJECTS + AGENT * (agent and c <= 1000), c, c, opts.delay, rounds)
    ]
    scale = rounds_of(SCALE_SUBJECTS, scale_runs, scale_k, opts.delay, rounds) if scale_runs else []
    print(f"3-turn runs, {opts.delay * 1e3:.0f} ms a model call; medians of {rounds} round(s),")
    print("each subject in a process of its own; KB/run: peak RSS growth per run")
    print(render(sized + scale))
    met = targets(sized, scale)
    for name, ok in met.items():
        print(f"target {name}: {'met' if ok else 'MISSED'}")
    if opts.json:
        with open(opts.json, "w") as fh:
            report = {"workload": "W16", "rows": sized, "scale": scale, "met": met}
            json.dump(report, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
