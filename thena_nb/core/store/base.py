"""What every run store shares: the recorder and store protocols, the turn record the
engine hands a store, and how a stored run is rebuilt.

A `RunStore` is a `RunRecorder` that can also read its runs back. The engine awaits
`turn_recorded` with a finished `TurnRecord` before the next turn starts (S28). Every store
keeps the same things:

- a header per run: `Run.header()` when it starts and `Run.ending()` once it has ended, with
  the history and the report tree;
- one record per turn: the `Turn`, the state snapshot after it, and the history messages the
  turn added;
- the run's request parts (`run.request_parts`: each distinct system prompt and tool-spec
  list its turns' requests refer to), each written with the first turn that refers to it
  (`request_parts_of`).

`rebuild_run` makes a `Run` from these, also for a run whose process was killed mid-run: its
history is then the input message followed by every record's messages, and its report tree
is rebuilt from the turns' step paths.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol, TypeVar

from thena_nb.core import _portals
from thena_nb.core.records._pace import RaisedThresholds, raised_thresholds
from thena_nb.core.records.decisions import pending_from_json, proposed_call
from thena_nb.core.records.report import ReportNode, ReportNodeKind
from thena_nb.core.records.types import Message, ToolCall, Turn, Usage
from thena_nb.core.runs.run import Run
from thena_nb.core.store._owner import keep_stored

__all__ = [
    "STORE_FORMAT",
    "RunRecorder",
    "RunStore",
    "TurnRecord",
    "decoding",
    "keep_stored",
    "missing_run",
    "open_turns_of",
    "rebuild_run",
    "records_of",
    "report_from_turns",
    "request_parts_of",
    "resolve_store",
    "summary_of",
]

STORE_FORMAT = 2
"""The version of what a store writes; every row carries it, and a reader refuses a row of a
newer one. 2: an SQLite file keeps its turns in `thena_turn_rows`, by run number (a reader
of format 1 would find none of them there, so it is told to upgrade instead); its rows are
written as those of format 1 are, and rows of format 1 load the same."""


@dataclass(frozen=True, slots=True)
class TurnRecord:
    """What the engine hands a store for one finished turn."""

    turn: Turn
    state: Any = None
    """The state snapshot after the turn (`run.states.get(turn.index)`), JSON-ready."""
    messages: Sequence[Message] = ()
    """The history messages the turn added: its assistant message, then one tool message per
    call, in call order."""
    stored: bool = False
    """The store has this turn already: a resume replayed it unchanged. Nothing to write."""
    drop_from: int | None = None
    """Stored turns from this index on are stale (a resume went live here): delete them
    before writing this one."""


class RunRecorder(Protocol):
    """Something that keeps runs as they happen, e.g. a run store (S28).

    `turn_recorded` is awaited before the next turn starts.
    """

    async def run_started(self, run: Run) -> None:
        """A run is about to take its first step."""
        ...

    async def turn_recorded(self, run: Run, record: TurnRecord) -> None:
        """A turn has finished and joined the run."""
        ...

    async def run_finished(self, run: Run) -> None:
        """The run has ended (`run.status` says how)."""
        ...


class RunStore(RunRecorder, Protocol):
    """Keeps runs as they happen (S28) and reads them back.

    The recorder side (`run_started`, `turn_recorded`, `run_finished`) is async and awaited
    by the engine; `turn_recorded` returns only once the turn is stored, so a run killed
    at any moment keeps every finished turn. The reading side is sync. A store of your own
    can check itself against the published contract suite, `thena_nb.store_contract`.

    A run has one writer: `run_started` claims it and raises `RunInUse` when another
    writer holds it; `run_finished` releases it and raises `StoreError` when the ending
    could not be stored (never silently). A `"running"` run whose writer is gone reads as
    `"abandoned"`. Two methods are optional, and ours have them: `async
    branch_turn_recorded(run, record)`, a parallel branch's turn as it finishes (a load
    gives those of a block still open as `run.open_turns`, which a resume reuses), and
    `statuses(run_ids)`, each stored run's status by id (an experiment's reuse look-up).
    A third, `summaries(run_ids)`, lets an experiment take stored runs again without
    loading them (`SqliteRunStore.summaries` says what it gives); without it, each run an
    experiment reuses is loaded.
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
        `input_tokens`, `output_tokens`, `started_at`, `finished_at`, `error`,
        `parent_run_id` and `forked_at` (`None` for a run that is no fork or continuation).
        """
        ...

    def delete(self, run_id: str) -> None:
        """Forget a run (nothing happens when there is no such run)."""
        ...


def missing_run(run_id: str, known: Sequence[str]) -> str:
    """The message of the `StoreError` for a run id the store does not hold."""
    hint = f"; it holds {', '.join(map(repr, known[-5:]))}" if known else "; it holds no runs"
    return f"no run {run_id!r} in the store{hint}. `thena_nb.runs()` lists the stored runs."


def open_turns_of(turns: Sequence[Turn], branch_turns: Sequence[Turn]) -> list[Turn]:
    """The stored branch turns of a parallel block still open: those no merged turn of
    `turns` is (matched by step path and request key, as a replay matches branch turns)."""
    merged = Counter((t.step_path, t.request_key) for t in turns if t.branch is not None)
    out = []
    for turn in branch_turns:
        key = (turn.step_path, turn.request_key)
        if merged[key]:
            merged[key] -= 1
        else:
            out.append(turn)
    return out


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
        "parent_run_id": header.get("parent_run_id"),
        "forked_at": header.get("forked_at"),
    }


def request_parts_of(run: Run, turn: Turn) -> dict[str, Any]:
    """The entries of `run.request_parts` that `turn`'s request refers to (a store writes
    those it does not hold yet with the turn)."""
    request = turn.request
    if request is None:
        return {}
    parts = run.request_parts
    return {k: parts[k] for k in (request.system, request.tools) if k in parts}


def rebuild_run(
    header: dict[str, Any],
    records: Sequence[TurnRecord],
    *,
    history: list[Message] | None = None,
    report: ReportNode | None = None,
    parts: dict[str, Any] | None = None,
) -> Run:
    """A `Run` from a stored header and its turn records (in index order), and the request
    parts its turns refer to.

    A run that ended has its `history`, `report` and usage stored. A run whose process died
    mid-run has not: they are rebuilt from the records (then each record needs its messages).
    """
    run = Run(workflow_name=header["workflow"], input=header["input"], run_id=header["run_id"])
    run.request_parts = parts if parts is not None else {}
    run.status = header["status"]
    run.error = header.get("error")
    run.started_at = datetime.fromisoformat(header["started_at"])
    finished = header.get("finished_at")
    run.finished_at = datetime.fromisoformat(finished) if finished else None
    run.output = header.get("output")
    run.state = header.get("state")
    run.replay_diverged_at = header.get("replay_diverged_at")
    run.parent_run_id = header.get("parent_run_id")
    run.forked_at = header.get("forked_at")
    run.pending, run.pending_turn = pending_from_json(header.get("pending"))
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
    # Every record carries its own turn's messages. Files written before that sent a
    # parallel block's messages with the next record, so a kill right after the block left
    # its turns without them; rebuild those from the turns.
    answered = sum(1 for m in history if m.role == "assistant")
    for r in records[answered:]:
        history.extend(messages_of(r.turn))
    return history


def records_of(run: Run) -> list[TurnRecord]:
    """The turn records of a finished run (e.g. one made in another process, to store it).

    Turn `k`'s messages start at the history's `k`-th assistant message.
    """
    starts = [i for i, m in enumerate(run.history) if m.role == "assistant"]
    ends = [*starts[1:], len(run.history)]
    return [
        TurnRecord(turn, run.states.get(turn.index), tuple(run.history[a:b]))
        for turn, a, b in zip(run.turns, starts, ends, strict=False)
    ]


def messages_of(turn: Turn) -> list[Message]:
    """The history messages a turn added, rebuilt from its record.

    The assistant message carries the calls as the model made them (no outcome yet), then
    one tool message per call in call order. (A rescued call refused before it could run
    looks like any other failed call here.)
    """
    calls = [proposed_call(c) for c in turn.tool_calls]
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


_R = TypeVar("_R", bound=RunRecorder)


def resolve_store(store: _R | Literal[False] | None) -> _R | RunStore | None:
    """What a `store=` argument means: a store as given, `False` for none, `None` for the
    default store (which is itself `None` when `THENA_NB_STORE` is off)."""
    if store is False:
        return None
    return store if store is not None else _portals.default_store()


FULL_COLLECTIONS_HELD = (0, 0, 1 << 30)
"""The collector's thresholds while a stored run is decoded (`decoding`): the young
generations as they are, no full collection."""


def decoding() -> RaisedThresholds:
    """A `with` block for decoding a stored run: the collector makes no full collection in
    it, its young collections go on.

    A large run is a few hundred thousand new objects (records, their dicts and lists),
    none of them garbage. Made with the collector as it is, they set off several full
    collections of the whole heap along the way, which cost more than decoding them (a
    10,000-turn run: about half a second of a second's load). Turning the collector off
    instead leaves them all to its first young collection afterwards, which walks them at
    once, out of the processor's caches by then (a quarter of the load's time). Here its
    young collections go on and walk them in small batches, just made; the full collection
    they put off comes later, as it would for any other objects. Blocks share one change
    with the runs under way (`records/_pace`); `gc.disable()` is left alone.

    Example:
        >>> import gc
        >>> with decoding():
        ...     gc.get_threshold()[2] == FULL_COLLECTIONS_HELD[2]
        True
    """
    return _DECODING


_DECODING = raised_thresholds(FULL_COLLECTIONS_HELD)
