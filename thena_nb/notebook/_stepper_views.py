"""What the Stepper shows, as functions of plain data: each returns HTML text or PNG bytes.

The header, the position line, the turn card, the frame window, the what-if answer, error
boxes, the live label and the failure chart. Nothing here holds state or touches a widget or
a session: `stepper.py` decides what to show and when, these say how it looks. Every text a
model, a tool or a user wrote goes through `_html.escape`.
"""

from __future__ import annotations

import json
import math
import traceback
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from thena_nb.core.records import _html
from thena_nb.core.records.report import ReportNode
from thena_nb.core.records.types import Turn
from thena_nb.notebook import _transcript

__all__ = [
    "CHART_LOOPS",
    "EMPTY_PAUSED_TOOLS",
    "EMPTY_POSITION",
    "EMPTY_RUNNING",
    "EMPTY_VIEW_POSITION",
    "EMPTY_WAITING",
    "FORK_NEEDS_WORKFLOW",
    "LIVE_LABEL",
    "OpenLoopLike",
    "answering_html",
    "calling_html",
    "chart_png",
    "edit_note_html",
    "error_html",
    "exception_text",
    "fork_tooltip",
    "frame_table_html",
    "frame_window",
    "frozen_loop",
    "header_html",
    "loop_limits",
    "ordinal",
    "parsed_reply",
    "paused_line",
    "position_html",
    "reply_text",
    "turn_card_html",
    "view_html",
    "what_if_html",
    "would_stop_html",
]

LIVE_LABEL = "model text (live, while a turn runs)"
"""The label over the live text box while no turn is running."""
EMPTY_POSITION = "<i>no turns yet: Step or Run to start</i>"
"""The position line before the first turn."""
EMPTY_RUNNING = "<i>the first turn is running…</i>"
"""The position line while the first turn runs."""
EMPTY_WAITING = (
    "<i>the first turn waits for a decision: decide its tool calls in the cards above</i>"
)
"""The position line while the first turn's tool calls are held at a gate."""
EMPTY_PAUSED_TOOLS = (
    "<i>the first turn's model has answered; paused before its tools — Continue runs them</i>"
)
"""The position line while the run is paused before the first turn's tools."""
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
_SHOWN_STATUS = {"stopping": "stopping…", "pausing": "pausing…"}
_STATUS_LINE = {
    "stopping": "stopping… (the model call in flight is being cancelled)",
    "pausing": "pausing… (the model call in flight finishes, then the run pauses before its tools)",
}
_VIEW_STYLE = "border-left:3px solid var(--thena-accent, #1565c0);padding:2px 8px"


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
    paused_at: str | None = None,
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
        paused_at: Where a paused session waits (`session.paused_at`): `"tools"` (after a
            turn's model call, before its tools) or `"model"` (before a model call).
    """
    esc = _html.escape
    shown = _SHOWN_STATUS.get(status, status)
    badge = f'<span class="thena-badge s-{esc(status)}">{esc(shown)}</span>'
    count = esc(_html.plural(turn_count, "turn"))
    if in_block:
        count += f" (+{esc(in_block)} in a parallel block)"
    tail = ""
    if hit is not None:
        tail = f" · <b>breakpoint</b> at turn {esc(hit)}: {esc(reason)}"
    if waiting:
        verb = "waits" if waiting == 1 else "wait"
        tail += f" · <b>{esc(_html.plural(waiting, 'tool call'))} {verb} for a decision</b>"
    lines = [
        f"<div><b>Stepper</b> · workflow <b>{esc(workflow)}</b> · {badge} · {count}{tail}</div>"
    ]
    if input is not None:
        lines.append(f'<div class="thena-line">input: {esc(_cut(input, 200))}</div>')
    if status in _STATUS_LINE:
        live = esc(_STATUS_LINE[status])
    elif status == "paused" and not waiting:
        live = paused_line(paused_at)
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


def paused_line(paused_at: str | None) -> str:
    """What a paused run waits for, as the header's live line says it (`""`: not paused).

    Example:
        >>> paused_line("tools")
        'paused before tools — Continue runs them'
    """
    if paused_at == "tools":
        return "paused before tools — Continue runs them"
    if paused_at == "model":
        return "paused before the next model call — Continue or Step goes on"
    return ""


def _open_loop_line(depth: int, loop: OpenLoopLike) -> str:
    esc = _html.escape
    arrow = "↳ " * depth
    return (
        f'<div class="thena-line">{arrow}loop <code>{esc(loop.path)}</code>: now at iteration '
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
    return f'<pre class="thena-stepper-error">{_html.escape(text)}</pre>'


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
        raised = _html.escape(exception_text(verdict))
        return f"{head}: <span class='thena-bad-text'>{raised}</span>"
    return f"{head}: <b>{'yes' if verdict else 'no'}</b>"


def position_html(
    turn: Turn, turn_count: int, *, limits: tuple[int, float] | None, tokens: int
) -> str:
    """Where the shown turn is: its place, step, loop iteration, fail streak and tokens.

    A turn is named by its 0-based index with a `#` (`turn #2`), its place counted from 1
    as an ordinal (`3rd of 3`); loop iterations count from 1, as `ctx.iteration` does.

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
        f"turn #{esc(turn.index)} ({esc(ordinal(turn.index + 1))} of {esc(turn_count)})",
        f"step <code>{esc(turn.step_path)}</code>",
    ]
    if turn.iteration is None:
        items.append("not in a loop")
    else:
        max_iterations, max_fails = limits if limits else ("?", "?")
        items.append(f"ran in loop iteration {esc(turn.iteration)} of {esc(max_iterations)}")
        streak = f"{esc(turn.consecutive_fails)} of {esc(_fails_limit(max_fails))}"
        items.append(f"consecutive fails after it {streak}")
    items.append(f"tokens so far {esc(tokens)}")
    return f'<div class="thena-stepper-position">{" · ".join(items)}</div>'


def ordinal(n: int) -> str:
    """`n` as an English ordinal: `1st`, `2nd`, `3rd`, `4th`, `11th`, `22nd`.

    Example:
        >>> [ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 102)]
        ['1st', '2nd', '3rd', '4th', '11th', '12th', '13th', '21st', '102nd']
    """
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _fails_limit(max_fails: float | str) -> str:
    # `max_fails` arrives as a float (`5.0`); it is shown as the user wrote it, `inf` as off.
    if isinstance(max_fails, str):
        return max_fails
    if math.isinf(max_fails):
        return "off"
    return str(int(max_fails)) if float(max_fails).is_integer() else str(max_fails)


def frame_window(index: int, rows: int, count: int) -> tuple[int, int]:
    """The `(lo, hi)` slice of the `count` turns the frame shows: every turn when they fit in
    `rows`, else `rows` turns around `index` (the shown one), as the chart shows them all.

    Example:
        >>> frame_window(0, 20, 3), frame_window(50, 20, 100), frame_window(99, 20, 100)
        ((0, 3), (40, 60), (80, 100))
    """
    if count <= rows:
        return 0, count
    lo = max(0, min(index - rows // 2, count - rows))
    return lo, lo + rows


def frame_table_html(
    turns: Sequence[Turn], lo: int, hi: int, *, rows: int, current: int | None = None
) -> str:
    """The turn table of `turns[lo:hi]` under a `turns lo–hi` line (`rows` is its height)."""
    return _transcript.frame_table_html(turns, lo, min(hi, lo + rows), current=current)


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
        f"<span class='thena-muted'>({_html.escape(recorded)})</span></li>"
    )


def answering_html(agent: str | None, branch: int | None = None) -> str:
    """The live label while `agent`'s model call runs (in a parallel branch, if given)."""
    where = f" (branch {_html.escape(branch)})" if branch is not None else ""
    return f"<b>{_html.escape(agent)}</b>{where} is answering…"


def calling_html(agent: str | None, tool: str) -> str:
    """The live label while `agent`'s call of `tool` runs."""
    return f"<b>{_html.escape(agent)}</b> calls <code>{_html.escape(tool)}</code>…"


def edit_note_html(turn: Turn, target: str | None, text: str) -> str:
    """What "Edit this turn and continue" will do with `text` in the edit box.

    Args:
        turn: The shown turn.
        target: `"reply"`, or the id of the tool call whose result is edited.
        text: The edit box's text.
    """
    esc = _html.escape
    at = f"turn #{esc(turn.index)}"
    if target is None:
        return ""
    if target != "reply":
        call = next((c for c in turn.tool_calls if c.id == target), None)
        name = esc(call.name if call is not None else target)
        return (
            f'<div class="thena-edit-note">the fork reuses the turns before {at}; in it, '
            f"<code>{name}</code> returns this text instead of its recorded result, and the "
            f"model goes on from there live</div>"
        )
    try:
        parsed = parsed_reply(text)
    except ValueError as exc:
        return f'<div class="thena-edit-note thena-bad-text">{esc(exc)}</div>'
    if parsed is None:
        dropped = ""
        if turn.tool_calls:
            names = ", ".join(f"<code>{esc(c.name)}</code>" for c in turn.tool_calls)
            dropped = (
                f" <b>The recorded tool calls ({names}) are dropped</b>: keep the JSON "
                f'form (<code>{{"text": …, "tool_calls": […]}}</code>) to keep or change them.'
            )
        return (
            f'<div class="thena-edit-note">the fork reuses the turns before {at}; its model '
            f"answers with this text only, no tool call.{dropped} The turns after it run "
            f"live.</div>"
        )
    listed = ", ".join(f"<code>{esc(name)}</code>" for name, _ in parsed[1]) or "no tool"
    return (
        f'<div class="thena-edit-note">the fork reuses the turns before {at}; its model '
        f"calls {listed} with the arguments given (they run live), then the run goes on "
        f"live.</div>"
    )


def reply_text(turn: Turn) -> str:
    """The edit box's text for the reply of `turn`: its text, or, for a turn that called
    tools, its text and calls as JSON that `parsed_reply` reads back."""
    if not turn.tool_calls:
        return turn.info.response
    calls = [{"name": c.name, "arguments": c.arguments} for c in turn.tool_calls]
    return json.dumps(
        {"text": turn.info.response, "tool_calls": calls}, indent=2, ensure_ascii=False
    )


def parsed_reply(text: str) -> tuple[str, list[tuple[str, dict[str, Any]]]] | None:
    """`(text, [(tool name, arguments), ...])` of an edited reply in the JSON form of
    `reply_text`, or `None` when `text` is a plain text answer.

    Raises:
        ValueError: The JSON form is there but a call is not `{"name": str, "arguments": {}}`,
            or its `"text"` is not a string.

    Example:
        >>> parsed_reply('{"text": "", "tool_calls": [{"name": "add", "arguments": {"a": 1}}]}')
        ('', [('add', {'a': 1})])
        >>> parsed_reply("just text") is None
        True
    """
    try:
        parsed = json.loads(text)
    except ValueError:
        return None
    if not isinstance(parsed, dict) or "tool_calls" not in parsed:
        return None
    calls, said = parsed["tool_calls"], parsed.get("text", "")
    if not isinstance(said, str):
        raise ValueError('"text" must be a string (use "" for none)')
    if not isinstance(calls, list):
        raise ValueError('"tool_calls" must be a list of {"name": ..., "arguments": {...}}')
    out: list[tuple[str, dict[str, Any]]] = []
    for call in calls:
        name = call.get("name") if isinstance(call, dict) else None
        arguments = call.get("arguments", {}) if isinstance(call, dict) else None
        if not isinstance(name, str) or not isinstance(arguments, dict):
            raise ValueError(
                f'each tool call needs a "name" (a string) and "arguments" (an object), '
                f"got {call!r}"
            )
        out.append((name, arguments))
    return said, out


def frozen_loop(node: ReportNode, turn_count: int) -> ReportNode:
    """What the chart reads of a loop node, copied as it is now (the run goes on meanwhile)."""
    indexes = [i for i in node.turn_indexes() if i < turn_count]
    agent = ReportNode(kind="agent", name="turns", path=node.path, turns=indexes)
    return node.model_copy(update={"children": [agent]})


def chart_png(turns: Sequence[Turn], loops: Sequence[ReportNode]) -> bytes:
    """The failure chart of `loops` as PNG bytes (needs matplotlib; runs in a worker thread)."""
    from thena_nb.notebook.charts import failure_chart, figure_png

    return figure_png(failure_chart(turns, loops), dpi=_CHART_DPI)
