"""W8: what `import thena_nb` and the first run cost, each in fresh processes.

Three measures, each a new interpreter launched K times, round by round with the others
(bytecode written first, by one launch with `PYTHONDONTWRITEBYTECODE` unset, which every
launch here also has unset):

- `import thena_nb`;
- the usual first lines, `from thena_nb import Agent, Workflow, loop, tool, until_answered`
  and `from thena_nb.models import FunctionModel, reply`;
- those lines, a one-tool agent in a loop, and its first one-turn `wf.run("go", store=False)`.

Beside them, for reference: the bare interpreter (`pass`) and `import pydantic` with one
model, which any program of records made with pydantic pays. Shown: the median and the
minimum wall time of the K launches, and the median CPU time (user + system) of the child,
which a busy machine disturbs less. `--instructions` also counts each measure's
instructions once under callgrind (valgrind), the steadiest figure on a shared machine.
Target: `import thena_nb` in 120 ms or less (minimum wall time).

    python benchmarks/import_cost.py                   # K = 15
    python benchmarks/import_cost.py --quick           # K = 5
    python benchmarks/import_cost.py --instructions    # also instruction counts
    python benchmarks/import_cost.py --code ../before --code .     # two checkouts, in turn
    python benchmarks/import_cost.py --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
IMPORT_TARGET_MS = 120.0
USER_LINE = (
    "from thena_nb import Agent, Workflow, loop, tool, until_answered\n"
    "from thena_nb.models import FunctionModel, reply\n"
)
FIRST_RUN = (
    USER_LINE + "@tool\n"
    "def add(a: int, b: int) -> int:\n"
    "    '''Add two numbers.'''\n"
    "    return a + b\n"
    "agent = Agent('A', model=FunctionModel(lambda request: reply.text('hi')), tools=[add])\n"
    "wf = Workflow('w', [loop(steps=[agent], until=until_answered)])\n"
    "assert wf.run('go', store=False).output == 'hi'\n"
)
MEASURES = {
    "import thena_nb": "import thena_nb\n",
    "the usual imports": USER_LINE,
    "imports + first one-turn run": FIRST_RUN,
}
REFERENCES = {
    "python (pass)": "pass\n",
    "import pydantic + one model": (
        "import pydantic\nclass M(pydantic.BaseModel):\n    x: int\nM(x=1)\n"
    ),
}


def child_env(code_dir: Path) -> dict[str, str]:
    """The environment of every launch: thena_nb from `code_dir`, bytecode written and read."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(code_dir), env.get("PYTHONPATH")]))
    return env


def against_first(first: dict[Any, float], key: Any, value: float, digits: int = 0) -> str:
    """`"  (-12 %)"`: `value` against the first one a table showed for `key` (remembered in
    `first`), or `""` for that first one."""
    if key not in first:
        first[key] = value
        return ""
    return f"  ({(value / first[key] - 1) * 100:+.{digits}f} %)"


def child_row(module: str, args: list[str], code_dir: Path, cwd: Path) -> dict[str, Any]:
    """Run `python -m module --child *args` with `code_dir`'s thena_nb (`THENA_NB_BENCH_CODE`
    too, for a child that puts it first on its path) and return the JSON object it prints
    last, with `"code"` added."""
    env = child_env(code_dir)
    env["THENA_NB_BENCH_CODE"] = str(code_dir)
    done = subprocess.run(
        [sys.executable, "-m", module, "--child", *args],
        env=env,
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    )
    row: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    row["code"] = str(code_dir)
    return row


def _launch(code: str, env: dict[str, str], cwd: str) -> tuple[float, float]:
    """Wall and CPU milliseconds of one fresh interpreter running `code`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd, check=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall * 1000, cpu * 1000


def _summary(times: list[tuple[float, float]]) -> dict[str, float]:
    walls = [w for w, _ in times]
    return {
        "median_ms": statistics.median(walls),
        "min_ms": min(walls),
        "median_cpu_ms": statistics.median(c for _, c in times),
    }


def instructions(code: str, env: dict[str, str], cwd: str) -> int | None:
    """The instructions one launch runs, counted by callgrind; `None` without valgrind."""
    return instructions_of([sys.executable, "-c", code], env, cwd)


def counted_per_turn(
    args: list[str], env: dict[str, str], n: int, runs: tuple[int, int]
) -> tuple[list[int], float]:
    """The instructions of `args + [n, r]` for each `r` in `runs` under callgrind, and the
    instructions per turn: `(count_b - count_a) / ((b - a) * n)`.

    Raises:
        SystemExit: valgrind is not installed.
    """
    # One launch first, not counted, writes the bytecode: else the first counted launch
    # alone would compile the modules (as `import_cost` does for the same reason).
    subprocess.run([*args, "1", "0"], env=env, cwd=ROOT, check=True, capture_output=True)
    counts = []
    for r in runs:
        count = instructions_of([*args, str(n), str(r)], env, str(ROOT))
        if count is None:
            raise SystemExit("counting instructions needs valgrind: apt-get install valgrind")
        counts.append(count)
    (a, b), (ca, cb) = runs, counts
    return counts, (cb - ca) / ((b - a) * n)


def instructions_of(command: list[str], env: dict[str, str], cwd: str) -> int | None:
    """The instructions `command` runs (every thread), counted by callgrind; `None` without
    valgrind. Its profile goes nowhere: only the total is read."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        return None
    proc = subprocess.run(
        [valgrind, "--tool=callgrind", "--callgrind-out-file=/dev/null", *command],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )
    for line in proc.stderr.splitlines():
        if "Collected" in line:
            return int(line.rsplit(":", 1)[1].strip())
    return None


def measure_all(launches: int, code_dirs: list[Path], *, count: bool) -> list[dict[str, Any]]:
    """One row per checkout and case (measures, then references). The launches go round
    by round, one of each case and checkout per round, so that a busy moment slows all
    alike."""
    cases = [("measure", n, c) for n, c in MEASURES.items()]
    cases += [("reference", n, c) for n, c in REFERENCES.items()]
    envs = [child_env(d) for d in code_dirs]
    times: dict[tuple[int, str], list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory() as cwd:  # no checkout on the path but `code_dir`
        for env in envs:
            for _, _, code in cases:
                _launch(code, env, cwd)  # writes the bytecode
        for _ in range(launches):
            for i, env in enumerate(envs):
                for _, name, code in cases:
                    times.setdefault((i, name), []).append(_launch(code, env, cwd))
        rows = []
        for i, (code_dir, env) in enumerate(zip(code_dirs, envs, strict=True)):
            for kind, name, code in cases:
                row: dict[str, Any] = {"code": str(code_dir), "name": name, "kind": kind}
                row.update(_summary(times[(i, name)]))
                if count:
                    row["instructions"] = instructions(code, env, cwd)
                rows.append(row)
    return rows


def render(rows: list[dict[str, Any]], launches: int) -> str:
    """The rows as a text table."""
    lines: list[str] = []
    for i, r in enumerate(rows):
        if i == 0 or r["code"] != rows[i - 1]["code"]:
            lines.append(
                f"{r['code']:<30} {'median':>8} {'min':>8} {'CPU':>8} {'instructions':>14}"
                f"   ms; {launches} fresh processes each"
            )
        count = r.get("instructions")
        shown = f"{count / 1e6:,.0f} M" if count else "-"
        lines.append(
            f"{r['name']:<30} {r['median_ms']:>8.1f} {r['min_ms']:>8.1f}"
            f" {r['median_cpu_ms']:>8.1f} {shown:>14}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Measure, print a table and optionally write JSON."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="5 launches instead of 15")
    parser.add_argument("--instructions", action="store_true", help="count them (valgrind)")
    parser.add_argument(
        "--code",
        action="append",
        help="import thena_nb from this checkout (default: this one); give it twice or more "
        "to compare checkouts, launched in turn",
    )
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args(argv)
    launches = 5 if args.quick else 15
    code_dirs = [Path(c).resolve() for c in args.code] if args.code else [ROOT]
    rows = measure_all(launches, code_dirs, count=args.instructions)
    print(render(rows, launches))
    import_min = rows[-len(MEASURES) - len(REFERENCES)]["min_ms"]  # the last checkout's
    met = {"import": import_min <= IMPORT_TARGET_MS}
    print(
        f"target: import thena_nb ≤ {IMPORT_TARGET_MS:.0f} ms (minimum wall): "
        f"{'met' if met['import'] else 'MISSED'} ({import_min:.1f} ms)"
    )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(
                {
                    "workload": "W8",
                    "code": [str(d) for d in code_dirs],
                    "launches": launches,
                    "rows": rows,
                    "targets": {"import_min_ms": IMPORT_TARGET_MS},
                    "met": met,
                },
                fh,
                indent=2,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
