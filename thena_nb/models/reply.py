"""Helpers that build the replies of offline models: `reply.text`, `reply.tool`, ...

Example:
    >>> from thena_nb.models import reply
    >>> reply.tool("add", a=1, b=2).tool_calls[0].arguments
    {'a': 1, 'b': 2}
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NoReturn

from pydantic import BaseModel

from thena_nb.core.records.model import Reply
from thena_nb.core.records.types import ToolCall, blank, construct

__all__ = ["ErrorReply", "calls", "error", "text", "tool"]


class ErrorReply:
    """A scripted reply that raises `exc` from the model call instead of answering.

    It raises `exc` itself, the very object given (so `except` clauses and `pytest.raises`
    that compare identity see it), as it was given: the notes, traceback and chained
    exceptions a run added to it are taken off again before each raise, so they never
    pile up across runs or retries.
    """

    __slots__ = ("_given", "exc")

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc
        self._given = _state(exc)

    def raise_it(self) -> NoReturn:
        """Raise `exc`, as it was when this reply was made."""
        exc = self.exc
        notes, cause, context, suppress, noted = self._given
        if notes is None:
            vars(exc).pop("__notes__", None)
        else:
            exc.__notes__ = list(notes)
        vars(exc).pop("_thena_noted", None)  # where a run added its note
        if noted:
            exc._thena_noted = True  # type: ignore[attr-defined]
        exc.__cause__, exc.__context__, exc.__suppress_context__ = cause, context, suppress
        raise exc.with_traceback(None)

    def __repr__(self) -> str:
        return f"reply.error({self.exc!r})"


_Given = tuple[tuple[str, ...] | None, BaseException | None, BaseException | None, bool, bool]


def _state(exc: BaseException) -> _Given:
    """What a run may change on `exc`: its notes, chained exceptions, and the mark of a note."""
    notes = getattr(exc, "__notes__", None)
    return (
        None if notes is None else tuple(notes),
        exc.__cause__,
        exc.__context__,
        exc.__suppress_context__,
        bool(getattr(exc, "_thena_noted", False)),
    )


def text(
    content: str,
    *,
    finish_reason: str | None = None,
    input_tokens: int = 0,
    output_tokens: int = 0,
) -> Reply:
    """A text answer (which may hold a tool call written as text, for rescue to find)."""
    reason = finish_reason or "end_turn"
    if type(content) is str and type(reason) is str and _counts_fit(input_tokens, output_tokens):
        return _reply(content, [], reason, input_tokens, output_tokens)
    return Reply(  # validated: it says what is wrong
        text=content,
        finish_reason=reason,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
    )


def tool(
    name: str,
    arguments: Mapping[str, Any] | None = None,
    /,
    *,
    finish_reason: str | None = None,
    input_tokens: int = 0,
    output_tokens: int = 0,
    **kw_arguments: Any,
) -> Reply:
    """One native tool call; arguments as a dict or as keywords.

    For text beside the call, use `reply.calls([(name, arguments)], text=...)`.

    Example:
            >>> from thena_nb.models import reply
        >>> reply.tool("get_weather", {"city": "Lisbon"}).tool_calls[0].arguments
        {'city': 'Lisbon'}
    """
    args = dict(arguments or {})
    args.update(kw_arguments)
    reason = finish_reason or "tool_use"
    if type(reason) is str and _counts_fit(input_tokens, output_tokens):  # as `calls` does
        return _reply("", [_native_call(name, args)], reason, input_tokens, output_tokens)
    return calls(
        [(name, args)],
        finish_reason=finish_reason,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
    )


def calls(
    tool_calls: Iterable[tuple[str, Mapping[str, Any]]],
    *,
    text: str = "",
    finish_reason: str | None = None,
    input_tokens: int = 0,
    output_tokens: int = 0,
) -> Reply:
    """Several native tool calls in one turn, in order."""
    # The id is left empty: offline models give each call an id that is the same in every
    # run (`call_<n>_<i>`), so replays and request keys line up.
    made = [_native_call(name, dict(args)) for name, args in tool_calls]
    reason = finish_reason or ("tool_use" if made else "end_turn")
    if type(text) is str and type(reason) is str and _counts_fit(input_tokens, output_tokens):
        return _reply(text, made, reason, input_tokens, output_tokens)
    return Reply(  # validated: it says what is wrong
        text=text,
        tool_calls=made,
        finish_reason=reason,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
    )


# A function's reply is made every turn: when its parts are plainly right (a `str`, a
# name and a dict with `str` keys, token counts in range) it is built without pydantic's
# validation, which costs more than the rest of the reply; anything else is validated.
_MAX_COUNT = 2**63


def _counts_fit(input_tokens: object, output_tokens: object) -> bool:
    # (two plain tests: `all()` over a generator costs more than the rest, a reply each)
    return (
        type(input_tokens) is int
        and type(output_tokens) is int
        and 0 <= input_tokens < _MAX_COUNT
        and 0 <= output_tokens < _MAX_COUNT
    )


def _native_call(name: object, arguments: dict[str, Any]) -> ToolCall:
    """A call of `name` with `arguments`, a dict of the caller's own (the call keeps it)."""
    plain = type(name) is str
    for k in arguments:  # (a loop: `all()` over a generator costs more, a call each)
        if type(k) is not str:
            plain = False
            break
    if not plain:
        return ToolCall(id="", name=name, arguments=arguments, source="native")  # type: ignore[arg-type]
    values = _CALL.copy()  # (its keys shared with every call's: `blank`)
    values["name"] = name
    values["arguments"] = arguments
    return construct(ToolCall, values)


def _reply(
    text: str, made: list[ToolCall], reason: str, input_tokens: int, output_tokens: int
) -> Reply:
    values = {
        **_REPLY,
        "text": text,
        "tool_calls": made,
        "finish_reason": reason,
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
    }
    return construct(Reply, values)


def _defaults(cls: type[BaseModel]) -> dict[str, Any]:
    """The default of each field of `cls` that has one (a factory's value made once: the
    builders above always give their own lists and dicts)."""
    fields = cls.model_fields.items()
    return {n: f.get_default(call_default_factory=True) for n, f in fields if not f.is_required()}


_CALL = blank(ToolCall)
_CALL.update(_defaults(ToolCall), id="", source="native")
_REPLY = _defaults(Reply)


def error(exc: BaseException) -> ErrorReply:
    """This model call raises `exc` (e.g. `TransientModelError("overloaded")`)."""
    return ErrorReply(exc)
