"""Experiments at scale: many 3-turn runs on a slow model, at high concurrency.

Every run calls `lookup` twice and then answers (3 turns); the model takes `L` per call (an
async model object of its own, so no thread per call and no request log). With `R` runs at
concurrency `K` the ideal wall time is `ceil(R / K) * 3 * L`. Each case runs in a process of
its own (so its peak RSS is its own) and prints one line:

    scale       R = 10,000, K = 1,000, L = 50 ms, SQLite store: wall / ideal     (<= 2)
    throughput  R = 10,000, K = 1,000, L = 0, no store: runs per second          (>= 8,000)
    rss         R = 10,000, K = 1,000, L = 0, SQLite store: peak RSS             (<= 60 MB)
    hung        R = 2,000, K = 100, L = 50 ms, 1 % of runs hang 30 s, run_timeout=0.6 s
    transient   R = 2,000, K = 100, L = 50 ms, 5 % of model calls raise a transient error
    ray         R = 1,000, K = 100, L = 50 ms, local Ray with 2 CPUs: wall / local backend

    python benchmarks/experiment_scale.py                     # every case but ray
    python benchmarks/experiment_scale.py scale rss ray       # some cases
    python benchmarks/experiment_scale.py scale --runs 2000 --concurrency 200 --store none
    python benchmarks/experiment_scale.py --quick             # smaller R
    python benchmarks/experiment_scale.py --json out.json
    python benchmarks/experiment_scale.py scale --profile /tmp/exp.prof   # cProfile the case

The hung and transient cases compare with the ideal of the same runs without the fault
(`ceil(R / K) * 3 * L`); 1.5x is the target for both. The transient case retries after
`--retry-delay` (default `L`, i.e. 50 ms, times the policy's jitter): the default policy's
0.5 s is ten model calls here, while with a real model (`L` of 1-5 s) it is a fraction of
one; `--retry-delay 0.5` measures the default policy.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import math
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from thena_nb import Agent, Workflow, loop, tool, until_answered
from thena_nb.core.records.errors import TransientModelError
from thena_nb.core.records.model import ModelRequest, Reply
from thena_nb.core.records.types import RetryPolicy
from thena_nb.experiments import run_experiment
from thena_nb.models import reply

TURNS = 3
HANG_S = 30.0
CASES = ("scale", "throughput", "rss", "hung", "transient", "ray")
DEFAULTS: dict[str, dict[str, Any]] = {
    "scale": {"runs": 10_000, "concurrency": 1_000, "delay": 0.05, "store": "sqlite"},
    "throughput": {"runs": 10_000, "concurrency": 1_000, "delay": 0.0, "store": "none"},
    "rss": {"runs": 10_000, "concurrency": 1_000, "delay": 0.0, "store": "sqlite"},
    "hung": {"runs": 2_000, "concurrency": 100, "delay": 0.05, "store": "none", "hung": 0.01},
    "transient": {"runs": 2_000, "concurrency": 100, "delay": 0.05, "store": "none",
                  "transient": 0.05, "retry_delay": 0.05},
    "ray": {"runs": 1_000, "concurrency": 100, "delay": 0.05, "store": "none"},
}  # fmt: skip
TARGETS = {"scale": 2.0, "throughput": 8_000, "rss": 60.0, "hung": 1.5, "transient": 1.5,
           "ray": 3.0}  # fmt: skip
RUN_TIMEOUT_S = 0.6
"""The hung case's `run_timeout`: four times a normal run's 150 ms."""


@tool
def lookup(q: str) -> str:
    """Look something up."""
    return f"found {q}"


REPLIES = [reply.tool("lookup", q="a"), reply.tool("lookup", q="b"), reply.text("done")]


class SlowModel:
    """Takes `delay` per call, then replies by how many tool results the run has seen.

    Stateless, so any number of interleaved runs can share it. `hung` of the runs (by input)
    hang on their first call; `transient` of the calls raise a `TransientModelError` (500).
    """

    def __init__(self, delay: float, *, hung: float = 0.0, transient: float = 0.0) -> None:
        self.name = "slow"
        self.delay = delay
        self.hung = hung
        self.transient = transient
        self._random = random.Random(7)

    async def respond(self, request: ModelRequest) -> Reply:
        """The next reply of a 3-turn run, after the delay (or a hang, or an error)."""
        seen = sum(1 for m in request.messages if m.role == "tool")
        if self.hung and seen == 0 and self._hangs(request):
            await asyncio.sleep(HANG_S)
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.transient and self._random.random() < self.transient:
            raise TransientModelError("server error", status_code=500, model_name=self.name)
        return REPLIES[seen]

    def _hangs(self, request: ModelRequest) -> bool:
        number = int(str(request.messages[0].content).rsplit(" ", 1)[1])
        return number % round(1 / self.hung) == 0


def three_turns(model: Any, retry_delay: float | None = None) -> Workflow:
    """A loop that makes exactly three model calls (two tool calls, then an answer); with
    `retry_delay`, transient errors are retried after that (times the policy's jitter)."""
    agent = Agent("Executor", model=model, tools=[lookup], rescue=False)
    retry = RetryPolicy() if retry_delay is None else RetryPolicy(initial_delay=retry_delay)
    return Workflow("scale", [loop(steps=[agent], until=until_answered)], retry=retry)


def _store(kind: str, tmp: str) -> Any:
    if kind == "none":
        return False
    if kind == "memory":
        from thena_nb.store import MemoryRunStore

        return MemoryRunStore()
    from thena_nb.store import SqliteRunStore

    return SqliteRunStore(Path(tmp) / "runs.db")


class _GcClock:
    """Seconds the cyclic garbage collector ran (through `gc.callbacks`)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._started = 0.0

    def __enter__(self) -> _GcClock:
        gc.callbacks.append(self._tick)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._tick)

    def _tick(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._started


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(case: str, **o: Any) -> dict[str, Any]:
    """Run one case once in this process and return its figures."""
    model = SlowModel(o["delay"], hung=o.get("hung", 0.0), transient=o.get("transient", 0.0))
    wf = three_turns(model, o.get("retry_delay"))
    inputs = [f"question {i}" for i in range(o["runs"])]
    extra: dict[str, Any] = {}
    if case == "hung" and o.get("run_timeout", RUN_TIMEOUT_S):
        extra["run_timeout"] = o.get("run_timeout", RUN_TIMEOUT_S)
    if case == "ray":
        extra["backend"] = "ray"
        _start_ray()
    rss0 = _rss_mb()
    with tempfile.TemporaryDirectory() as tmp:
        store = _store(o["store"], tmp)
        w0, c0 = time.perf_counter(), time.process_time()
        with _GcClock() as collector:
            exp = run_experiment(wf, inputs, concurrency=o["concurrency"], store=store,
                                 progress=False, **extra)  # fmt: skip
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        rss = _rss_mb()
        statuses = _statuses(exp)
    ideal = math.ceil(o["runs"] / o["concurrency"]) * TURNS * o["delay"]
    out = {"case": case, **o, "wall_s": round(wall, 3), "ideal_s": round(ideal, 3),
           "ratio": round(wall / ideal, 3) if ideal else None, "cpu_s": round(cpu, 3),
           "gc_s": round(collector.seconds, 3),
           "runs_per_s": round(o["runs"] / wall), "rss_mb": round(rss, 1),
           "rss_before_mb": round(rss0, 1), "statuses": statuses}  # fmt: skip
    if case == "ray":
        out["local_wall_s"] = _local_wall(wf, inputs, o["concurrency"])
        out["ratio_to_local"] = round(wall / out["local_wall_s"], 3)
    return out


def _statuses(exp: Any) -> dict[str, int]:
    """How many runs ended with each status (read from `exp.frame()`)."""
    counts = exp.frame()["status"].value_counts()
    return {str(k): int(v) for k, v in counts.items()}


def _start_ray() -> None:
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # type: ignore[no-untyped-call]


def _local_wall(wf: Workflow, inputs: list[str], concurrency: int) -> float:
    w0 = time.perf_counter()
    run_experiment(wf, inputs, concurrency=concurrency, store=False, progress=False)
    return round(time.perf_counter() - w0, 3)


def _headline(r: dict[str, Any]) -> str:
    case = r["case"]
    what = (f"{case:<10} R={r['runs']:,} K={r['concurrency']:,} L={r['delay'] * 1000:.0f} ms "
            f"store={r['store']}: wall {r['wall_s']:.2f} s")  # fmt: skip
    if case == "throughput":
        return f"{what}, {r['runs_per_s']:,} runs/s (target >= {TARGETS[case]:,})"
    if case == "rss":
        return f"{what}, peak RSS {r['rss_mb']:.0f} MB (target <= {TARGETS[case]:.0f} MB)"
    if case == "ray":
        return (f"{what}, local {r['local_wall_s']:.2f} s, ray / local "
                f"{r['ratio_to_local']:.2f} (target <= {TARGETS[case]})")  # fmt: skip
    return (f"{what}, ideal {r['ideal_s']:.2f} s, ratio {r['ratio']:.2f} (target <= "
            f"{TARGETS[case]}), CPU {r['cpu_s']:.2f} s (gc {r['gc_s']:.2f} s), "
            f"peak RSS {r['rss_mb']:.0f} MB, {r['statuses']}")  # fmt: skip


def _in_process(case: str, options: dict[str, Any], profile: str | None) -> dict[str, Any]:
    if profile is None:
        return measure(case, **options)
    import cProfile

    profiler = cProfile.Profile()
    result = profiler.runcall(measure, case, **options)
    profiler.dump_stats(profile)
    return result


def _in_child(case: str, options: dict[str, Any]) -> dict[str, Any]:
    """The case in a fresh process, so that its RSS and imports are its own."""
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": str(root)}
    argv = [sys.executable, __file__, "--child", case, "--options", json.dumps(options)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"case {case} failed:\n{done.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    """Print one line per case; exit 1 when a case misses its target."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="*", help=f"some of {', '.join(CASES)}")
    parser.add_argument("--quick", action="store_true", help="a tenth of the runs")
    parser.add_argument("--runs", type=int, default=None)
    parser.add_argument("--concurrency", type=int, default=None)
    parser.add_argument("--delay", type=float, default=None, help="seconds per model call")
    parser.add_argument("--store", choices=("none", "memory", "sqlite"), default=None)
    parser.add_argument("--retry-delay", type=float, default=None, help="transient case")
    parser.add_argument(
        "--run-timeout",
        type=float,
        default=None,
        help=f"hung case (default {RUN_TIMEOUT_S}; 0: none, as before)",
    )
    parser.add_argument("--json", default=None, help="also write the figures to this file")
    parser.add_argument("--profile", default=None, help="cProfile the (one) case to this file")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--options", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(measure(args.child, **json.loads(args.options))))
        return 0
    results = []
    for case in args.cases or [c for c in CASES if c != "ray"]:
        options = dict(DEFAULTS[case])
        if args.quick:
            options["runs"] = max(100, options["runs"] // 10)
        for name in ("runs", "concurrency", "delay", "store", "retry_delay", "run_timeout"):
            if getattr(args, name) is not None:
                options[name] = getattr(args, name)
        if args.profile:
            result = _in_process(case, options, args.profile)
        else:
            result = _in_child(case, options)
        print(_headline(result), flush=True)
        results.append(result)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0 if all(_met(r) for r in results) else 1


def _met(r: dict[str, Any]) -> bool:
    case, target = r["case"], TARGETS[r["case"]]
    if case == "throughput":
        return bool(r["runs_per_s"] >= target)
    if case == "rss":
        return bool(r["rss_mb"] <= target)
    if case == "ray":
        return bool(r["ratio_to_local"] <= target)
    return bool(r["ratio"] is not None and r["ratio"] <= target)


if __name__ == "__main__":
    sys.exit(main())
