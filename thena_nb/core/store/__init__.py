"""Run stores: where runs are kept as they happen, so they can be loaded, resumed and forked.

A `RunStore` is a `RunRecorder` (the executor awaits `turn_recorded` before the next turn
starts, S28) that can also read its runs back. Every store keeps the same things:

- a header per run: id, workflow name, input, status, start and end, and once the run has
  ended its usage, stop reasons, error, output, state, history and report tree;
- one record per turn: the `Turn`, the state snapshot after it (`run.states`), and the
  history messages that joined the run since the previous record.

`load` rebuilds a `Run` from these, also for a run whose process was killed mid-run: its
history is then the input message followed by every record's messages, and its report tree
is rebuilt from the turns' step paths.

`MemoryRunStore` is the reference implementation; `SqliteRunStore` keeps runs in a file.
`default_store()` is the store `wf.run()` uses when no `store=` is given: the file named by
`THENA_NB_STORE` (`"off"` or `""` turns it off), else `runs.sqlite3` under the user's data
directory.
"""

from __future__ import annotations

import json
import os
import threading
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

from pydantic import BaseModel

from thena_nb.core.context import RunRecorder
from thena_nb.core.errors import StoreError
from thena_nb.core.report import ReportNode, ReportNodeKind, Run
from thena_nb.core.types import Message, ToolCall, Turn, Usage
from thena_nb.core.types import finished as finished_call

if TYPE_CHECKING:
    from thena_nb.core.store.sqlite import SqliteRunStore

__all__ = [
    "ENV_VAR",
    "STORE_FORMAT",
    "MemoryRunStore",
    "RunStore",
    "SqliteRunStore",
    "StoreError",
    "default_store",
    "default_store_path",
    "resolve_store",
]

STORE_FORMAT = 1
"""The version of what a store writes; every row carries it."""

ENV_VAR = "THENA_NB_STORE"
"""Names the default store's file; `"off"` or `""` turns the default store off."""

_OFF = frozenset({"", "off"})


class RunStore(RunRecorder, Protocol):
    """Keeps runs as they happen (S28) and reads them back.

    The recorder side (`run_started`, `turn_recorded`, `run_finished`) is async and awaited
    by the executor; `turn_recorded` returns only once the turn is stored, so a run killed
    at any moment keeps every finished turn. The reading side is sync.
    """

    def load(self, run_id: str) -> Run:
        """The stored run, rebuilt; `run.workflow` is `None`.

        Raises:
            StoreError: There is no run `run_id`, or it cannot be read.
        """
        ...

    def list_runs(self) -> list[dict[str, Any]]:
        """One summary per stored run, in the order they started.

        Keys: `run_id`, `workflow`, `input`, `status`, `stop_reasons`, `turns`,
        `input_tokens`, `output_tokens`, `started_at`, `finished_at`, `error`.
        """
        ...

    def delete(self, run_id: str) -> None:
        """Forget a run (nothing happens when there is no such run)."""
        ...


# -- what stores keep ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TurnRecord:
    """What a store keeps of one turn."""

    turn: Turn
    state: Any = None
    """The state snapshot after the turn (`run.states.get(turn.index)`), JSON-ready."""
    messages: Sequence[Message] = ()
    """The history messages that joined the run since the previous record. Usually the
    turn's own; after a `parallel` block the branches' messages arrive with the next one."""


@dataclass(slots=True)
class RunProgress:
    """A store's bookkeeping for one run while it runs (kept in memory, per store)."""

    messages: int = 1
    """History messages already stored (the input message is in the header)."""
    kept: dict[int, str | None] = field(default_factory=dict)
    """Turns stored before this run started (same run id: a resume), by index, with their
    request keys. A replayed turn that asks the same keeps the stored record."""

    def take_messages(self, run: Run) -> list[Message]:
        """The history messages not stored yet, and mark them stored."""
        history = run.history
        new = history[self.messages :]
        self.messages = len(history)
        return new

    def plan(self, turn: Turn) -> tuple[bool, int | None]:
        """Whether to write `turn`, and from which index stale stored turns must go first.

        A resume replays the finished turns: those are already stored as they first
        happened, so they are kept. The first turn that differs makes every stored turn from
        its index on stale.
        """
        kept = self.kept
        if not kept:
            return True, None
        index = turn.index
        if turn.replayed and kept.get(index, "") == turn.request_key:
            return False, None
        # From here on nothing stored is reused: the replay has gone live.
        stale = any(i >= index for i in kept)
        kept.clear()
        return True, (index if stale else None)


def header_of(run: Run) -> dict[str, Any]:
    """The header fields known when a run starts."""
    return {
        "run_id": run.run_id,
        "workflow": run.workflow_name,
        "input": run.input,
        "status": run.status,
        "started_at": run.started_at.isoformat(),
    }


def final_of(run: Run) -> dict[str, Any]:
    """The header fields written when a run ends, JSON-ready (the history and report tree
    are the store's to write: each has a faster way than going through dicts)."""
    state = run.state
    if isinstance(state, BaseModel):
        state = state.model_dump(mode="json")
    return {
        "status": run.status,
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
        "error": run.error,
        "usage": run.usage.model_dump(mode="json"),
        "stop_reasons": run.stop_reasons,
        "output": run.output if _is_jsonable(run.output) else repr(run.output),
        "state": state if _is_jsonable(state) else None,
        "replay_diverged_at": run.replay_diverged_at,
        "turns": len(run.turns),
    }


def _is_jsonable(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


def missing_run(run_id: str, known: Sequence[str]) -> str:
    """The message of the `StoreError` for a run id the store does not hold."""
    hint = f"; it holds {', '.join(map(repr, known[-5:]))}" if known else "; it holds no runs"
    return f"no run {run_id!r} in the store{hint}. `thena_nb.runs()` lists the stored runs."


def summary_of(
    header: dict[str, Any], turns: int, in_tokens: int, out_tokens: int
) -> dict[str, Any]:
    """One row of `list_runs` from a stored header and its turns' totals."""
    finished = header.get("finished_at")
    return {
        "run_id": header["run_id"],
        "workflow": header["workflow"],
        "input": header["input"],
        "status": header["status"],
        "stop_reasons": dict(header.get("stop_reasons") or {}),
        "turns": turns,
        "input_tokens": in_tokens,
        "output_tokens": out_tokens,
        "started_at": datetime.fromisoformat(header["started_at"]),
        "finished_at": datetime.fromisoformat(finished) if finished else None,
        "error": header.get("error"),
    }


def rebuild_run(
    header: dict[str, Any],
    records: Sequence[TurnRecord],
    *,
    history: list[Message] | None = None,
    report: ReportNode | None = None,
) -> Run:
    """A `Run` from a stored header and its turn records (in index order).

    A run that ended has its `history`, `report` and usage stored. A run whose process died
    mid-run has not: they are rebuilt from the records (then each record needs its messages).
    """
    run = Run(workflow_name=header["workflow"], input=header["input"], run_id=header["run_id"])
    run.status = header["status"]
    run.error = header.get("error")
    run.started_at = datetime.fromisoformat(header["started_at"])
    finished = header.get("finished_at")
    run.finished_at = datetime.fromisoformat(finished) if finished else None
    run.output = header.get("output")
    run.state = header.get("state")
    run.replay_diverged_at = header.get("replay_diverged_at")
    turns = [r.turn for r in records]
    run.turns = turns
    run.states = {r.turn.index: r.state for r in records if r.state is not None}
    if history is not None:
        run.history = history
    else:
        run.history = _history_from_records(run.history[0], records)
        if turns:
            run.output = turns[-1].info.response
            last = run.states.get(turns[-1].index)
            run.state = last if last is not None else run.state
    run.report = report if report is not None else report_from_turns(run.workflow_name, turns)
    usage = header.get("usage")
    run.usage = Usage.model_validate(usage) if usage is not None else Usage.of(turns)
    return run


def _history_from_records(first: Message, records: Sequence[TurnRecord]) -> list[Message]:
    history = [first]
    for r in records:
        history.extend(r.messages)
    # A kill between a parallel block's records and the next turn loses the branches'
    # messages (they travel with the next record); rebuild those from their turns.
    answered = sum(1 for m in history if m.role == "assistant")
    for r in records[answered:]:
        history.extend(messages_of(r.turn))
    return history


def messages_of(turn: Turn) -> list[Message]:
    """The history messages a turn added, rebuilt from its record.

    The assistant message carries the calls as the model made them (no outcome yet), then
    one tool message per call in call order. (A rescued call refused before it could run
    looks like any other failed call here.)
    """
    calls = [finished_call(c, ok=None, result=None, error=None, retries=0) for c in turn.tool_calls]
    out = [
        Message(role="assistant", content=turn.info.response, agent=turn.agent, tool_calls=calls)
    ]
    out.extend(_tool_message(turn.agent, c) for c in turn.tool_calls)
    return out


def _tool_message(agent: str, call: ToolCall) -> Message:
    return Message(
        role="tool",
        content=(call.result if call.ok else call.error) or "",
        agent=agent,
        tool_call_id=call.id,
        is_error=not call.ok,
    )


def report_from_turns(workflow_name: str, turns: Sequence[Turn]) -> ReportNode:
    """A report tree rebuilt from the turns' step paths, for a run that never finished.

    Containers come from the paths (`.loop`, `.parallel`); loop children carry the turn's
    iteration when the loop is the turn's innermost one. Stop reasons are unknown (`None`).
    """
    root = ReportNode(kind="workflow", name=workflow_name, path=workflow_name)
    for turn in turns:
        parts = turn.step_path.split("/")[1:]
        inner = max((i for i, p in enumerate(parts[:-1]) if p.endswith(".loop")), default=None)
        node = root
        path = workflow_name
        for depth, part in enumerate(parts):
            path = f"{path}/{part}"
            leaf = depth == len(parts) - 1
            iteration = turn.iteration if node.kind == "loop" and depth - 1 == inner else None
            node = _child(node, path, part, leaf, iteration)
        node.turns.append(turn.index)
    for node in root.walk():
        if node.kind == "loop":
            node.iterations = max((c.iteration or 0 for c in node.children), default=0)
    return root


def _child(
    parent: ReportNode, path: str, part: str, leaf: bool, iteration: int | None
) -> ReportNode:
    last = parent.children[-1] if parent.children else None
    if not leaf:
        if parent.kind == "parallel":
            for child in parent.children:
                if child.path == path:
                    return child
        elif last is not None and last.path == path and last.iteration == iteration:
            return last
    position, _, name = part.partition(".")
    kind: ReportNodeKind = "agent" if leaf else "loop" if name == "loop" else "parallel"
    node = ReportNode(kind=kind, name=name, path=path, iteration=iteration)
    if parent.kind == "parallel" and position.isdigit():
        node.branch = int(position)
    parent.children.append(node)
    return node


# -- the default store -----------------------------------------------------------------------

_defaults: dict[tuple[int, str], SqliteRunStore] = {}
_defaults_lock = threading.Lock()


def default_store_path() -> Path | None:
    """Where the default store keeps runs, or `None` when it is turned off.

    `THENA_NB_STORE` names the file (`"off"` or `""` turns the store off); otherwise it is
    `$XDG_DATA_HOME/thena_nb/runs.sqlite3`, or `~/.local/share/thena_nb/runs.sqlite3`.
    """
    value = os.environ.get(ENV_VAR)
    if value is not None:
        value = value.strip()
        if value.lower() in _OFF:
            return None
        return Path(value).expanduser()
    data_home = os.environ.get("XDG_DATA_HOME", "").strip()
    base = Path(data_home) if os.path.isabs(data_home) else Path.home() / ".local" / "share"
    return base / "thena_nb" / "runs.sqlite3"


def default_store() -> RunStore | None:
    """The store runs go to when `store=` is not given, or `None` when it is turned off.

    One `SqliteRunStore` per file, shared by every run of the process. A file that cannot
    be created gives a warning and no store, so runs still work.
    """
    path = default_store_path()
    if path is None:
        return None
    key = (os.getpid(), os.path.abspath(path))  # a forked child opens its own connection
    with _defaults_lock:
        store = _defaults.get(key)
        if store is None:
            from thena_nb.core.store.sqlite import SqliteRunStore

            try:
                path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                store = SqliteRunStore(path)
            except (OSError, StoreError) as exc:
                warnings.warn(
                    f"thena_nb: runs are not being stored: cannot open {str(path)!r} ({exc}). "
                    f"Set {ENV_VAR} to a writable file, or to 'off'.",
                    RuntimeWarning,
                    stacklevel=2,
                )
                return None
            _defaults[key] = store
    return store


from thena_nb.core.store.memory import MemoryRunStore  # noqa: E402
from thena_nb.core.store.sqlite import SqliteRunStore  # noqa: E402

_R = TypeVar("_R", bound=RunRecorder)


def resolve_store(store: _R | Literal[False] | None) -> _R | RunStore | None:
    """What a `store=` argument means: a store as given, `False` for none, `None` for the
    default store (which is itself `None` when `THENA_NB_STORE` is off)."""
    if store is False:
        return None
    return store if store is not None else default_store()
