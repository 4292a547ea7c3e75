"""The Stepper's gate cards and its edit-and-continue fork: the cards and the sessions.

`GateCard` is one pending tool call with Approve, Edit (a JSON editor checked against the
tool's schema, the error shown inline), Reject (with a reason) and Respond (a result instead
of running the tool). `fork_session` is `run.fork(at, reply=|tool_results=)` as a `Session`
the Stepper can step through, instead of a run that has already gone to its end;
`live_fork_session` is `run.fork(at)` the same way ("Fork from here").
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal

from thena_nb.core import _fork
from thena_nb.core.engine.gates import GateError
from thena_nb.core.engine.session import Session
from thena_nb.core.parts.steps import walk
from thena_nb.core.records import _html
from thena_nb.core.records.decisions import Decision, PendingCall
from thena_nb.core.runs.run import Run
from thena_nb.notebook._widget_parts import Button, Html, Text

if TYPE_CHECKING:
    from thena_nb.core.parts.plan import Plan
    from thena_nb.core.store.base import RunStore

__all__ = ["GateCard", "fork_session", "live_fork_session", "schema_problems", "tool_schema"]

_JSON_TYPES: dict[str, tuple[str, tuple[type, ...]]] = {
    "string": ("a string", (str,)),
    "integer": ("an integer", (int,)),
    "number": ("a number", (int, float)),
    "boolean": ("true or false", (bool,)),
    "array": ("a list", (list,)),
    "object": ("an object", (dict,)),
    "null": ("null", (type(None),)),
}
"""A JSON schema type: how a message names it, and the Python types `json.loads` gives."""


def schema_problems(schema: Mapping[str, Any] | None, arguments: Mapping[str, Any]) -> list[str]:
    """What is wrong with `arguments` for a tool's JSON schema, one short sentence each:
    a missing field, an unknown one, a value of the wrong type or not among the allowed.

    Only the top level is checked (what a gate card's editor changes); the tool's own
    validation still decides, and its message is shown when this finds nothing.

    Example:
        >>> schema = {"type": "object", "properties": {"url": {"type": "string"},
        ...           "n": {"type": "integer"}}, "required": ["url"],
        ...           "additionalProperties": False}
        >>> schema_problems(schema, {"url": 3, "x": 1})
        ['url must be a string', 'x is not a parameter of the tool (it takes url, n)']
        >>> schema_problems(schema, {"n": "2"})
        ['url is missing', 'n must be an integer']
    """
    if not schema:
        return []
    properties: Mapping[str, Any] = schema.get("properties") or {}
    problems = [
        f"{name} is missing" for name in schema.get("required", ()) if name not in arguments
    ]
    for name, value in arguments.items():
        spec = properties.get(name)
        if spec is None:
            if properties and schema.get("additionalProperties") is False:
                takes = ", ".join(properties)
                problems.append(f"{name} is not a parameter of the tool (it takes {takes})")
            continue
        problem = _value_problem(spec, value)
        if problem:
            problems.append(f"{name} {problem}")
    return problems


def _value_problem(spec: Mapping[str, Any], value: Any) -> str:
    """Why `value` does not fit one property's schema, or `""` (unknown shapes pass)."""
    if "enum" in spec and value not in spec["enum"]:
        return "must be one of " + ", ".join(json.dumps(v) for v in spec["enum"])
    kinds = spec.get("type")
    if kinds is None and "anyOf" in spec:
        kinds = [option.get("type") for option in spec["anyOf"] if isinstance(option, dict)]
    if kinds is None:
        return ""
    kinds = [kinds] if isinstance(kinds, str) else list(kinds)
    known = [k for k in kinds if k in _JSON_TYPES]
    if not known or len(known) != len(kinds):
        return ""
    for kind in known:
        types = _JSON_TYPES[kind][1]
        # JSON's true and false are not numbers here, though Python's bool is an int.
        if isinstance(value, types) and not (isinstance(value, bool) and bool not in types):
            return ""
    return "must be " + " or ".join(_JSON_TYPES[k][0] for k in known)


def tool_schema(workflow: Any, pending: PendingCall) -> dict[str, Any] | None:
    """The JSON schema of the tool a pending call names, if its agent has that tool."""
    agents = [
        (path, step)
        for path, step in walk(workflow.steps, workflow.name)
        if getattr(step, "kind", None) == "agent" and step.name == pending.agent
    ]
    agents.sort(key=lambda found: found[0] != pending.step_path)  # its own path first
    for _, step in agents:
        for tool in step.tools:
            if tool.name == pending.call.name:
                return dict(tool.parameters)
    return None


class GateCard:
    """One pending call: what the model asked and the four decisions, each a button.

    Its parts (`head`, `editor`, `reason`, `result`, `error` and the four buttons) are the
    Stepper's `_widget_parts`; the Stepper's front end draws the card from `state()` and
    sends its decisions to `command`.

    Args:
        pending: The held call.
        schema: Its tool's JSON schema (shown, and what an edit must fit).
        decide: Called with `(call_id, Decision)`; raises `GateError` for an edit that does
            not fit the schema (shown inline, the call stays pending).
        on_change: Called when anything the card shows changed.
    """

    def __init__(
        self,
        pending: PendingCall,
        schema: Mapping[str, Any] | None,
        decide: Callable[[str, Decision], None],
        on_change: Callable[..., Any] | None = None,
    ) -> None:
        self.pending = pending
        self.schema = schema
        """The tool's JSON schema, or `None` when the tool is not known."""
        self._decide = decide
        call = pending.call
        arguments = json.dumps(call.arguments, indent=2, ensure_ascii=False, default=str)
        self.head = Html(value=_head_html(pending, schema))
        self.editor = Text(value=arguments, rows=4)
        self.reason = Text(placeholder="reason for rejecting")
        self.result = Text(placeholder="result instead of running the tool")
        self.error = Html()
        self.decided: Decision | None = None
        """The decision taken, once one was accepted."""
        self.approve_button = Button(description="Approve")
        self.edit_button = Button(description="Edit")
        self.reject_button = Button(description="Reject")
        self.respond_button = Button(description="Respond")
        for button, action in (
            (self.approve_button, self.approve),
            (self.edit_button, self.edit),
            (self.reject_button, self.reject),
            (self.respond_button, self.respond),
        ):
            button.on_click(lambda _, action=action: action())
        if on_change is not None:
            for part in (self.editor, self.reason, self.result, self.error, self.approve_button):
                part.observe(on_change)

    def state(self) -> dict[str, Any]:
        """What the front end draws: the call's id, the head, the boxes' texts, the error,
        and whether it was decided (its buttons are then off)."""
        return {
            "id": self.pending.call.id,
            "head": self.head.value,
            "editor": self.editor.value,
            "reason": self.reason.value,
            "result": self.result.value,
            "error": self.error.value,
            "decided": self.decided is not None,
        }

    def command(self, message: Mapping[str, Any]) -> bool:
        """Take a decision as the front end sends it: `do` names the button, `editor`,
        `reason` and `result` are the boxes' texts. Returns whether it was taken."""
        for name in ("editor", "reason", "result"):
            text = message.get(name)
            if isinstance(text, str):
                getattr(self, name).value = text
        button = {
            "approve": self.approve_button,
            "edit": self.edit_button,
            "reject": self.reject_button,
            "respond": self.respond_button,
        }.get(str(message.get("do")))
        if button is None or button.disabled:
            return False
        button.click()
        return self.decided is not None

    def approve(self) -> bool:
        """Approve the call; returns whether the decision was taken."""
        return self._take(Decision.approve())

    def edit(self, arguments: str | Mapping[str, Any] | None = None) -> bool:
        """Run the call with `arguments` (JSON text or a dict; the editor's text by default).
        Text that is not a JSON object, or arguments that do not fit the schema, are shown
        inline and the call stays pending."""
        if arguments is not None:
            self.editor.value = (
                arguments if isinstance(arguments, str) else json.dumps(dict(arguments))
            )
        try:
            parsed = json.loads(self.editor.value)
        except json.JSONDecodeError as exc:
            return self._fail(f"the arguments are not JSON: {exc}")
        if not isinstance(parsed, dict):
            return self._fail('the arguments must be a JSON object, e.g. {"a": 1}')
        problems = schema_problems(self.schema, parsed)
        if problems:
            return self._fail(
                f"the arguments do not fit tool {self.pending.call.name!r}: "
                f"{'; '.join(problems)}. The call is still pending: fix them and Edit again."
            )
        return self._take(Decision.edit(parsed))

    def reject(self, reason: str | None = None) -> bool:
        """Reject the call with `reason` (the reason box's text by default)."""
        if reason is not None:
            self.reason.value = reason
        return self._take(Decision.reject(self.reason.value.strip() or "it was rejected"))

    def respond(self, result: str | None = None) -> bool:
        """Give the model `result` instead of running the tool (the result box's text by
        default)."""
        if result is not None:
            self.result.value = result
        return self._take(Decision.respond(self.result.value))

    def _take(self, decision: Decision) -> bool:
        try:
            self._decide(self.pending.call.id, decision)
        except GateError as exc:
            return self._fail(_without_schema(str(exc)))
        self.decided = decision
        self.error.value = ""
        for b in (self.approve_button, self.edit_button, self.reject_button, self.respond_button):
            b.disabled = True
        return True

    def _fail(self, text: str) -> bool:
        self.error.value = f'<div class="thena-error-inline">{_html.escape(text)}</div>'
        return False


def _without_schema(message: str) -> str:
    """A gate's error as a card shows it: the schema it prints at its end left out (the
    card shows the schema under "schema")."""
    cut = message.find("; decide it again with arguments that fit")
    return message[:cut] + "; fix them and Edit again." if cut >= 0 else message


def _head_html(pending: PendingCall, schema: Mapping[str, Any] | None) -> str:
    esc = _html.escape
    call = pending.call
    shown = json.dumps(schema, ensure_ascii=False) if schema is not None else "(unknown tool)"
    return (
        f"<div><b>gate</b> · <b>{esc(pending.agent)}</b> wants to call "
        f"<code>{esc(call.name)}</code> (call <code>{esc(call.id)}</code>, turn "
        f"{esc(pending.turn_index)})</div><details><summary>schema</summary>"
        f"<pre style='white-space:pre-wrap'>{esc(shown)}</pre></details>"
    )


def fork_session(
    run: Run,
    at: int,
    *,
    reply: Any = None,
    tool_results: Mapping[str, str] | None = None,
    workflow: Plan | None = None,
    store: RunStore | Literal[False] | None = None,
) -> Session:
    """`run.fork(at, reply=... | tool_results=...)` as a session paused before its first
    turn (gates pause it, as in the Stepper): stepping it replays turns `0..at-1`, then
    serves the edited turn `at`. The fork is kept in `store` (the default store when
    `None`), as `run.fork`'s; it runs `workflow` (by default `run.workflow`).

    Raises:
        ValueError: The run has no workflow, `at` is out of range, the turn ran in a
            parallel block, or the edit does not fit the turn (the messages say how).
    """
    workflow = workflow if workflow is not None else run.workflow
    if workflow is None:
        raise ValueError(f"run {run.run_id!r} has no workflow to fork it with")
    if (reply is None) == (tool_results is None):
        raise ValueError("edit a turn with either a new reply or new tool results")
    return _fork.fork_session(
        workflow, run, at, reply=reply, tool_results=tool_results, store=store, at_gate="pause"
    )


def live_fork_session(
    workflow: Plan,
    run: Run,
    at: int,
    *,
    store: RunStore | Literal[False] | None = None,
) -> Session:
    """`run.fork(at, workflow=workflow)` as a session paused before its first turn: stepping
    it reuses turns `0..at-1` as recorded, then runs turn `at` onward live. Its run's
    `parent_run_id` is `run`'s id and `forked_at` is `at`.

    Raises:
        ValueError: `at` is not a turn index from 0 to `len(run.turns)`.
    """
    return _fork.fork_session(workflow, run, at, store=store, at_gate="pause")
