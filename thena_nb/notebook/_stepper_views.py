"""What the Stepper shows, as functions of plain data: each returns HTML text or PNG bytes.

The header, the position line, the turn card, the frame window, the what-if answer, error
boxes, the live label and the failure chart. Nothing here holds state or touches a widget or
a session: `stepper.py` decides what to show and when, these say how it looks. Every text a
model, a tool or a user wrote goes through `_html.escape`.
"""

from __future__ import annotations

import math
import traceback
from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from thena_nb.core import _html
from thena_nb.core.report import ReportNode
from thena_nb.core.types import Turn

__all__ = [
    "CHART_LOOPS",
    "EMPTY_POSITION",
    "EMPTY_VIEW_POSITION",
    "FORK_NEEDS_WORKFLOW",
    "LIVE_LABEL",
    "OpenLoopLike",
    "answering_html",
    "calling_html",
    "chart_png",
    "error_html",
    "exception_text",
    "fork_tooltip",
    "frame_table_html",
    "frame_window",
    "frozen_loop",
    "header_html",
    "loop_limits",
    "position_html",
    "turn_card_html",
    "view_html",
    "what_if_html",
    "would_stop_html",
]

LIVE_LABEL = "model text (live, while a turn runs)"
"""The label over the live text box while no turn is running."""
EMPTY_POSITION = "<i>no turns yet: Step or Run to start</i>"
"""The position line before the first turn."""
EMPTY_VIEW_POSITION = "<i>this run has no turns: fork it to run it live</i>"
"""The position line of a viewed run that has no turns."""
FORK_NEEDS_WORKFLOW = (
    "Needs the run's workflow: open it with thena_nb.stepper(run, workflow=wf) "
    "or run.stepper(workflow=wf)"
)
"""The tooltip of "Fork from here" when no workflow is at hand."""
_VIEWED = {
    "finished": "a finished run",
    "stopped": "a stopped run",
    "failed": "a failed run",
    "budget": "a run that spent its budget",
    "waiting": "a run waiting for a decision",
    "running": "an unfinished run",
}
CHART_LOOPS = 6
"""The chart draws at most the last this-many loop nodes (a nested loop adds one per run)."""
_CHART_DPI = 72
_STATUS_COLORS = {
    "new": "#777",
    "paused": "#1f77b4",
    "running": "#1f77b4",
    "finished": "#2ca02c",
    "stopped": "#ff7f0e",
    "budget": "#ff7f0e",
    "failed": "#d62728",
}
_RED = "#d62728"
_VIEW_STYLE = "border-left:3px solid var(--thena-accent, #1565c0);padding:2px 8px"
_PRE = "white-space:pre-wrap;word-break:break-word;margin:2px 0"


class _Answer(Protocol):
    """What `what_if_html` reads of one answer of `run.what_if`."""

    @property
    def iteration(self) -> int | None: ...

    @property
    def stop_reason(self) -> str | None: ...


def exception_text(exc: BaseException) -> str:
    """`Type: message`, the last line of the exception's traceback."""
    return "".join(traceback.format_exception_only(exc)).strip()


def header_html(
    workflow: str,
    status: str,
    turn_count: int,
    *,
    hit: int | None,
    reason: str,
    input: str | None = None,
    live: str = "",
    loops: Sequence[OpenLoopLike] = (),
    stopped: Sequence[ReportNode] = (),
    in_block: int = 0,
    waiting: int = 0,
) -> str:
    """The header: workflow, the run's input, a status badge, the turn count, who is
    answering, each open loop against its limits, stop-reason badges, a breakpoint.

    Args:
        workflow: The workflow's name.
        status: The Stepper's `status`.
        turn_count: Turns recorded so far.
        hit: The turn whose breakpoint paused the run, or `None`.
        reason: Why that breakpoint held.
        input: The run's input.
        live: What happens now, e.g. `answering_html(agent)`; HTML made here.
        loops: The open loops, outermost first (`session.open_loops`).
        stopped: Loop nodes that have stopped, each shown with its stop reason.
        in_block: Branch turns of a `parallel` block under way, not counted yet.
        waiting: Tool calls that wait for a decision.
    """
    esc = _html.escape
    shown = "stopping…" if status == "stopping" else status
    badge = f'<span class="thena-badge s-{esc(status)}">{esc(shown)}</span>'
    count = esc(_html.plural(turn_count, "turn"))
    if in_block:
        count += f" (+{esc(in_block)} in a parallel block)"
    tail = ""
    if hit is not None:
        tail = f" · <b>breakpoint</b> at turn {esc(hit)}: {esc(reason)}"
    if waiting:
        tail += f" · <b>{esc(_html.plural(waiting, 'tool call'))} wait for a decision</b>"
    lines = [
        f"<div><b>Stepper</b> · workflow <b>{esc(workflow)}</b> · {badge} · {count}{tail}</div>"
    ]
    if input is not None:
        lines.append(f'<div class="thena-line">input: {esc(_cut(input, 200))}</div>')
    if live:
        lines.append(f'<div class="thena-line thena-live">{live}</div>')
    lines.extend(_open_loop_line(depth, loop) for depth, loop in enumerate(loops))
    lines.extend(_stopped_line(node) for node in stopped)
    return f'<div class="thena-stepper-header">{"".join(lines)}</div>'


class OpenLoopLike(Protocol):
    """What the header reads of an open loop (`session.open_loops`)."""

    @property
    def path(self) -> str: ...
    @property
    def iteration(self) -> int: ...
    @property
    def max_iterations(self) -> int: ...
    @property
    def consecutive_fails(self) -> int: ...
    @property
    def max_fails(self) -> float: ...


def _open_loop_line(depth: int, loop: OpenLoopLike) -> str:
    esc = _html.escape
    arrow = "↳ " * depth
    return (
        f'<div class="thena-line">{arrow}loop <code>{esc(loop.path)}</code>: iteration '
        f"{esc(loop.iteration)} of {esc(loop.max_iterations)} · consecutive fails "
        f"{esc(loop.consecutive_fails)} of {esc(_fails_limit(loop.max_fails))}</div>"
    )


def _stopped_line(node: ReportNode) -> str:
    esc = _html.escape
    reason = node.stop_reason or "error"
    limit = f" of {esc(node.max_iterations)}" if node.max_iterations is not None else ""
    return (
        f'<div class="thena-line">loop <code>{esc(node.path)}</code> stopped: '
        f'<span class="thena-badge r-{esc(reason)}">{esc(reason)}</span> after '
        f"{esc(_html.plural(node.iterations, 'iteration'))}{limit}</div>"
    )


def _cut(text: str, limit: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def view_html(status: str, turn_count: int, *, run_id: str, can_fork: bool) -> str:
    """The status line of a viewed run: what is shown and how to go on live.

    Args:
        status: The run's status.
        turn_count: Its turns.
        run_id: Its id.
        can_fork: Whether a workflow is at hand to fork it with.

    Example:
        >>> html = view_html("failed", 12, run_id="ab12", can_fork=True)
        >>> "viewing a failed run (12 turns) — fork from here to continue live" in html
        True
    """
    esc = _html.escape
    what = _VIEWED.get(status, f"a run ({status})")
    head = f"viewing {esc(what)} ({esc(_html.plural(turn_count, 'turn'))})"
    if can_fork:
        tail = "fork from here to continue live"
    else:
        tail = (
            "to continue live, open it with its workflow: "
            "<code>thena_nb.stepper(run, workflow=wf)</code>"
        )
    return (
        f'<div class="thena-stepper-view" style="{_VIEW_STYLE}">{head} — {tail} '
        f'<span class="thena-muted">· run <code>{esc(run_id)}</code></span></div>'
    )


def fork_tooltip(at: int, *, can_fork: bool) -> str:
    """The tooltip of "Fork from here" with turn `at` shown."""
    if not can_fork:
        return FORK_NEEDS_WORKFLOW
    if at <= 0:
        return "Start a live session from the first turn: the whole run runs again live"
    return (
        f"Start a live session from turn {at}: turns 0–{at - 1} are reused as recorded, "
        f"turn {at} on runs live"
    )


def loop_limits(loops: Sequence[ReportNode]) -> dict[int, tuple[int, float]]:
    """`(max_iterations, max_fails)` of the innermost loop each turn ran in, by turn index,
    as the report recorded them (a viewed run has no open loops to ask)."""
    limits: dict[int, tuple[int, float]] = {}
    for node in loops:  # pre-order: an inner loop comes after the loop around it
        if node.max_iterations is None:
            continue
        fails = node.max_fails if node.max_fails is not None else math.inf
        for index in node.turn_indexes():
            limits[index] = (node.max_iterations, fails)
    return limits


def error_html(text: str) -> str:
    """An error box with `text` in it, or `""` when there is no text."""
    if not text:
        return ""
    return (
        f'<pre class="thena-stepper-error" style="{_PRE};color:{_RED}">{_html.escape(text)}</pre>'
    )


def turn_card_html(turn: Turn, *, would_stop: str | None, break_reason: str | None) -> str:
    """One turn's card: the turn itself, the loop's `until` verdict and the breakpoint.

    Args:
        turn: The turn shown.
        would_stop: `would_stop_html` of the turn's loop, or `None` outside loops.
        break_reason: Why a breakpoint held after this turn, if one did.
    """
    parts = ['<div class="thena-stepper-turn">', _html.turn_html(turn)]
    if would_stop is not None:
        parts.append(f"<div class='thena-would-stop'>{would_stop}</div>")
    if break_reason:
        parts.append(f"<div><b>breakpoint</b>: {_html.escape(break_reason)}</div>")
    parts.append("</div>")
    return "".join(parts)


def would_stop_html(label: str, verdict: bool | BaseException) -> str:
    """Whether the loop's `until` (named `label`) held after a turn, or what it raised."""
    head = f"until <code>{_html.escape(label)}</code> would stop"
    if isinstance(verdict, BaseException):
        return f"{head}: <span style='color:{_RED}'>{_html.escape(exception_text(verdict))}</span>"
    return f"{head}: <b>{'yes' if verdict else 'no'}</b>"


def position_html(
    turn: Turn, turn_count: int, *, limits: tuple[int, float] | None, tokens: int
) -> str:
    """Where the shown turn is: its place, step, loop iteration, fail streak and tokens.

    Args:
        turn: The turn shown.
        turn_count: Turns recorded so far.
        limits: The loop's `(max_iterations, max_fails)` when the turn ran, if known.
        tokens: Input plus output tokens of the run up to and including this turn.
    """
    # Every value goes through the one escaping place, numbers included: an `int`
    # subclass (or a loaded record) can print as anything.
    esc = _html.escape
    items = [
        f"turn {esc(turn.index)} ({esc(turn.index + 1)} of {esc(turn_count)})",
        f"step <code>{esc(turn.step_path)}</code>",
    ]
    if turn.iteration is None:
        items.append("not in a loop")
    else:
        max_iterations, max_fails = limits if limits else ("?", "?")
        items.append(f"loop iteration {esc(turn.iteration)} of {esc(max_iterations)}")
        streak = f"{esc(turn.consecutive_fails)} of {esc(_fails_limit(max_fails))}"
        items.append(f"consecutive fails {streak}")
    items.append(f"tokens so far {esc(tokens)}")
    return f'<div class="thena-stepper-position">{" · ".join(items)}</div>'


def _fails_limit(max_fails: float | str) -> str:
    # `max_fails` arrives as a float (`5.0`); it is shown as the user wrote it, `inf` as off.
    if isinstance(max_fails, str):
        return max_fails
    if math.isinf(max_fails):
        return "off"
    return str(int(max_fails)) if float(max_fails).is_integer() else str(max_fails)


def frame_window(index: int, rows: int) -> tuple[int, int]:
    """The `(lo, hi)` slice of turns the frame shows: `rows` turns up to and including `index`."""
    hi = index + 1
    return max(0, hi - rows), hi


def frame_table_html(
    turns: Sequence[Turn], lo: int, hi: int, *, rows: int, current: int | None = None
) -> str:
    """The turn table of `turns[lo:hi]` under a `turns lo–hi` line (`rows` is its height)."""
    from thena_nb.notebook._transcript import frame_table_html as table

    return table(turns, lo, min(hi, lo + rows), current=current)


def what_if_html(label: str, loops: Sequence[ReportNode], answers: Mapping[str, _Answer]) -> str:
    """The answer of `run.what_if`: for each loop, where it would have stopped.

    Args:
        label: The condition's name.
        loops: The run's loop nodes (`run.loops`), in the order `answers` has them.
        answers: `run.what_if(until)`, one entry per loop node.
    """
    if not answers:
        return "<div class='thena-what-if'>the run has no loops yet</div>"
    rows = [
        _what_if_row(key, node, answer.iteration, answer.stop_reason)
        for key, node, answer in _keyed(loops, answers)
    ]
    return (
        f"<div class='thena-what-if'>what if until = <code>{_html.escape(label)}</code>"
        f"<ul style='margin:2px 0'>{''.join(rows)}</ul></div>"
    )


def _keyed(
    loops: Sequence[ReportNode], answers: Mapping[str, _Answer]
) -> Iterable[tuple[str, ReportNode, _Answer]]:
    # `run.what_if` answers every loop node in `run.loops` order, keying a loop that ran
    # again (inside another loop) `path#2`, `path#3`, ...
    for (key, answer), node in zip(answers.items(), loops, strict=True):
        assert key.partition("#")[0] == node.path, (key, node.path)
        yield key, node, answer


def _what_if_row(key: str, node: ReportNode, iteration: int | None, reason: str | None) -> str:
    recorded = f"recorded: {node.iterations} iterations, stop reason {node.stop_reason}"
    if iteration is None:
        verdict = f"would not have stopped in the {node.iterations} recorded iterations"
    elif reason == "exhausted":
        verdict = f"would still have run out of iterations after <b>{iteration}</b>"
    else:
        verdict = f"would have stopped after iteration <b>{iteration}</b>"
    return (
        f"<li><code>{_html.escape(key)}</code>: {verdict} "
        f"<span style='color:#777'>({_html.escape(recorded)})</span></li>"
    )


def answering_html(agent: str | None, branch: int | None = None) -> str:
    """The live label while `agent`'s model call runs (in a parallel branch, if given)."""
    where = f" (branch {_html.escape(branch)})" if branch is not None else ""
    return f"<b>{_html.escape(agent)}</b>{where} is answering…"


def calling_html(agent: str | None, tool: str) -> str:
    """The live label while `agent`'s call of `tool` runs."""
    return f"<b>{_html.escape(agent)}</b> calls <code>{_html.escape(tool)}</code>…"


def frozen_loop(node: ReportNode, turn_count: int) -> ReportNode:
    """What the chart reads of a loop node, copied as it is now (the run goes on meanwhile)."""
    indexes = [i for i in node.turn_indexes() if i < turn_count]
    agent = ReportNode(kind="agent", name="turns", path=node.path, turns=indexes)
    return node.model_copy(update={"children": [agent]})


def chart_png(turns: Sequence[Turn], loops: Sequence[ReportNode]) -> bytes:
    """The failure chart of `loops` as PNG bytes (needs matplotlib; runs in a worker thread)."""
    from thena_nb.notebook.charts import failure_chart, figure_png

    return figure_png(failure_chart(turns, loops), dpi=_CHART_DPI)
