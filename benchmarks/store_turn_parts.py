"""Where a stored turn's instructions go: each piece of the default store's turn write, counted.

W15 counts the default path and the floor whole (`floor_loop.py`). This counts the pieces
of the store's share of a turn one by one, the same way (callgrind, two launches that make
A and B calls of the piece after the same warm-up, `PYTHONHASHSEED` fixed, the collector
off; `(count B - count A) / (B - A)` per call). Instructions do not depend on the state of
the caches, so a piece counted alone costs as many as it does inside a run, where its time
is larger. The pieces, on a turn of W1's loop (`turn_overhead.function_loop`: a call of
`add` and its result):

- `turn_json`: the turn's row text (`sqlite._turn_json`, pydantic's serializer);
- `messages_json`: the text of the two messages the turn added (`sqlite._messages_json`);
- `turn_values`: all of the row's values (the two texts, the key, the tokens);
- `insert`: the row's values and its `INSERT`, committed (SQLite's own transaction);
- `write`: the same through the store's write (`_write_alone`: the lock, the checks);
- `recorded`: all of the store's turn write (`turn_recorded`, the executor's call).

    python benchmarks/store_turn_parts.py                 # every piece, 10,000 calls each
    python benchmarks/store_turn_parts.py --part insert --calls 2000
    python benchmarks/store_turn_parts.py --json out.json

Needs valgrind (`apt-get install valgrind`).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.import_cost import child_env, counted_per_turn

ROOT = Path(__file__).resolve().parent.parent
PARTS = ("turn_json", "messages_json", "turn_values", "insert", "write", "recorded")
WARMUPS = 50
TURN = 5
"""The turn of the 20-turn W1 run whose row is written again and again."""


def pieces(tmp: str, calls: int) -> dict[str, Callable[[], object]]:
    """Each piece as a call that can be made `calls` times (each row under a key of its own,
    in a run number no run has)."""
    os.environ["THENA_NB_STORE"] = os.path.join(tmp, "runs.sqlite3")
    from benchmarks.turn_overhead import function_loop
    from thena_nb.core.store import sqlite as store_sqlite
    from thena_nb.core.store._sqlite_file import TURN_BITS
    from thena_nb.core.store.default import default_store
    from thena_nb.store import TurnRecord

    run = function_loop(20).run("go")
    store: Any = default_store()
    turn = run.turns[TURN]
    record = TurnRecord(turn, None, tuple(run.history[2 * TURN + 1 : 2 * TURN + 3]), False, None)
    key = [(1 << 30) << TURN_BITS]

    def values() -> tuple[Any, ...]:
        key[0] += 1
        return (key[0], *store_sqlite._turn_values(1, record)[1:])

    def write() -> object:
        row = values()
        return store._write_alone(
            "store a turn", lambda c: c.execute(store_sqlite._INSERT_TURN, row)
        )

    # `recorded`: the ended run's turn written again and again, as its next turns, the store
    # holding its number and its parts as it does while the run is live.
    store._numbers[run.run_id] = 1 << 29
    store._parts_written[run.run_id] = set(run.request_parts)
    turns = iter([turn.model_copy(update={"index": i}) for i in range(calls)])

    def recorded() -> None:
        coro = store.turn_recorded(run, TurnRecord(next(turns), None, record.messages, False, None))
        try:
            coro.send(None)
        except StopIteration:
            return
        raise AssertionError("a lone run's turn write waited")

    return {
        "turn_json": lambda: store_sqlite._turn_json(turn),
        "messages_json": lambda: store_sqlite._messages_json(list(record.messages)),
        "turn_values": values,
        "insert": lambda: store._conn.execute(store_sqlite._INSERT_TURN, values()),
        "write": write,
        "recorded": recorded,
    }


def child(part: str, per: int, units: int) -> dict[str, Any]:
    """`units * per` calls of `part` after the warm-up, the collector off; the rows the
    writing pieces stored are counted after."""
    with tempfile.TemporaryDirectory(prefix="store-turn-parts-") as tmp:
        call = pieces(tmp, WARMUPS + units * per)[part]
        for _ in range(WARMUPS):
            call()
        gc.collect()
        gc.disable()
        try:
            for _ in range(units * per):
                call()
        finally:
            gc.enable()
        from thena_nb.core.store._sqlite_file import TURN_BITS
        from thena_nb.core.store.default import default_store

        conn = default_store()._conn  # type: ignore[union-attr]
        # The rows of the run numbers the pieces write under (`pieces`): 2**29 and 2**30.
        low = (1 << 29) << TURN_BITS
        (rows,) = conn.execute(
            "SELECT count(*) FROM thena_turn_rows WHERE turn_key >= ?", (low,)
        ).fetchone()
    return {"part": part, "calls": units * per, "rows": rows}


def count(part: str, calls: int) -> float:
    """Instructions per call of `part`: launches of `calls // 10` and `calls * 11 // 10`."""
    env = child_env(ROOT)
    env["PYTHONHASHSEED"] = "0"
    args = [sys.executable, "-m", "benchmarks.store_turn_parts", "--child", part]
    per = max(1, calls // 10)
    _, per_call = counted_per_turn(args, env, per, (1, 11))
    return per_call


def main(argv: list[str] | None = None) -> int:
    """Count the pieces (or, with `--child`, be one launch), print them, optionally as JSON."""
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--child"]:
        if len(args) != 4 or args[1] not in PARTS:
            raise SystemExit(f"usage: --child {{{','.join(PARTS)}}} PER UNITS")
        print(json.dumps(child(args[1], int(args[2]), int(args[3]))))
        return 0
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--part", action="append", choices=PARTS, help="(every piece)")
    parser.add_argument("--calls", type=int, default=10_000, help="calls counted (10,000)")
    parser.add_argument("--json", help="also write the figures to this file")
    opts = parser.parse_args(args)
    if shutil.which("valgrind") is None:
        raise SystemExit("counting instructions needs valgrind: apt-get install valgrind")
    rows = []
    for part in opts.part or PARTS:
        rows.append({"part": part, "instructions": count(part, opts.calls)})
        print(f"{part:>14} {rows[-1]['instructions']:>10,.0f} instructions a call", flush=True)
    if opts.json:
        with open(opts.json, "w") as fh:
            json.dump({"workload": "W15 store parts", "rows": rows}, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
