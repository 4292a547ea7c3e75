"""Stop conditions for `loop(until=...)` and the helpers to write them.

A condition is `until(ctx)` or `until(ctx, state)`; truthy stops the loop. The helpers here
are `Condition` objects, which compose: `a | b` stops when either does, `a & b` when both do,
and a plain function joins a composition unchanged.

Example:
    >>> from thena_nb import max_tool_calls, until_answered
    >>> stop = until_answered | max_tool_calls(20)
    >>> stop
    (until_answered | max_tool_calls(20))
"""

from __future__ import annotations

import contextlib
import inspect
import json
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from thena_nb.core.parts.steps import callable_name
from thena_nb.core.records.types import TurnInfo

if TYPE_CHECKING:
    from thena_nb.core.parts.context import Context

__all__ = [
    "Condition",
    "StopCondition",
    "call_condition",
    "called_tool",
    "condition_arity",
    "max_tool_calls",
    "stuck",
    "turn_of",
    "until_answered",
    "until_finish_reason",
    "until_text",
    "was_exhausted",
]

StopCondition = Callable[..., Any]
"""`until(ctx)` or `until(ctx, state)`; truthy stops the loop."""


def condition_arity(fn: Callable[..., Any]) -> tuple[int, int]:
    """How many positional parameters `fn` requires and accepts at most.

    Only parameters without defaults count as required, so `until(ctx, state=None)` is
    `(1, 2)`: accepted in any workflow, and it receives the state (or `None`).
    """
    if isinstance(fn, Condition):
        return fn.arity
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return (1, 1)
    required = accepted = 0
    for p in sig.parameters.values():
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            accepted += 1
            if p.default is p.empty:
                required += 1
        elif p.kind is p.VAR_POSITIONAL:
            accepted = 2 if accepted < 2 else accepted
    return required, accepted


def call_condition(fn: Callable[..., Any], ctx: Any, state: Any) -> Any:
    """Call a stop condition as `fn(ctx, state)` or `fn(ctx)`, as its signature asks.

    The executor, the what-if evaluation and the Stepper all go through here.
    """
    if isinstance(fn, Condition):
        return fn(ctx, state)
    return fn(ctx, state) if _accepts_state(fn) else fn(ctx)


def _accepts_state(fn: Callable[..., Any]) -> bool:
    try:
        return _ACCEPTS_STATE[fn]
    except (KeyError, TypeError):  # TypeError: an unhashable callable
        takes = condition_arity(fn)[1] >= 2
        with contextlib.suppress(TypeError):
            _ACCEPTS_STATE[fn] = takes
        return takes


_ACCEPTS_STATE: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()
_NO_CONTEXT: Any = object()
"""The default of `Condition.__call__`'s `ctx`: a condition called with nothing, as in
`until=until_answered()`, gets a hint instead of a bare missing-argument error."""


class Condition:
    """A stop condition that composes with `|` and `&`.

    Args:
        fn: `fn(ctx)` or `fn(ctx, state)`.
        name: How the condition shows in reprs and the workflow view.
    """

    def __init__(self, fn: Callable[..., Any], name: str | None = None) -> None:
        self._fn = fn
        self.name: str = name or str(getattr(fn, "__name__", None) or repr(fn))
        self.arity = condition_arity(fn)
        self._accepted = self.arity[1]
        self.parts: tuple[Callable[..., Any], ...] = ()

    def __call__(self, ctx: Context = _NO_CONTEXT, state: Any = None) -> Any:
        if ctx is _NO_CONTEXT:
            raise TypeError(
                f"`{self.name}` is a condition: pass it without calling it, e.g. "
                f"`loop(steps=[...], until={self.name})`"
            )
        if self._accepted >= 2:
            return self._fn(ctx, state)
        return self._fn(ctx)

    def __or__(self, other: Callable[..., Any]) -> Condition:
        return _compose("|", self, other)

    def __ror__(self, other: Callable[..., Any]) -> Condition:
        return _compose("|", other, self)

    def __and__(self, other: Callable[..., Any]) -> Condition:
        return _compose("&", self, other)

    def __rand__(self, other: Callable[..., Any]) -> Condition:
        return _compose("&", other, self)

    def __repr__(self) -> str:
        return self.name


def _compose(op: str, a: Callable[..., Any], b: Callable[..., Any]) -> Condition:
    if not callable(a) or not callable(b):
        raise TypeError(f"cannot compose stop conditions {a!r} {op} {b!r}: both must be callable")
    if op == "|":

        def either(ctx: Context, state: Any = None) -> bool:
            return bool(call_condition(a, ctx, state)) or bool(call_condition(b, ctx, state))

        fn = either
    else:

        def both(ctx: Context, state: Any = None) -> bool:
            return bool(call_condition(a, ctx, state)) and bool(call_condition(b, ctx, state))

        fn = both
    cond = Condition(fn, f"({callable_name(a)} {op} {callable_name(b)})")
    # Arity of a composition is that of its most demanding part, so S9 checks every part.
    req = max(condition_arity(a)[0], condition_arity(b)[0])
    cond.arity = (req, 2)
    cond.parts = (a, b)
    return cond


def condition_parts(fn: Callable[..., Any]) -> list[Callable[..., Any]]:
    """The plain functions and leaf conditions a (possibly composed) condition is made of."""
    if isinstance(fn, Condition) and fn.parts:
        return [leaf for part in fn.parts for leaf in condition_parts(part)]
    return [fn]


def _condition(name: str) -> Callable[[Callable[..., Any]], Condition]:
    def wrap(fn: Callable[..., Any]) -> Condition:
        cond = Condition(fn, name)
        cond.__doc__ = fn.__doc__
        return cond

    return wrap


def turn_of(ctx: Context) -> TurnInfo | None:
    """The last turn's `TurnInfo`, or `None` before any turn (S17).

    Example:
        >>> from thena_nb import turn_of
        >>> def answered_with_text(ctx):
        ...     t = turn_of(ctx)
        ...     return t is not None and not t.called_tool and bool(t.response.strip())
    """
    return ctx.turn


@_condition("called_tool")
def called_tool(ctx: Context) -> bool:
    """True when the model called a tool, natively or in its text, in the last turn (S19)."""
    t = ctx.turn
    return t is not None and t.called_tool


@_condition("until_answered")
def until_answered(ctx: Context) -> bool:
    """Stop when the agent answered without calling a tool (S15).

    An empty response counts as answered (S16); for a stricter stop check
    `turn_of(ctx).response.strip()` too.
    """
    t = ctx.turn
    return t is None or not t.called_tool


@_condition("was_exhausted")
def was_exhausted(ctx: Context) -> bool:
    """True when the most recent loop stopped at `max_iterations` rather than at `until` (S20)."""
    return ctx.last_loop_stop_reason == "exhausted"


def max_tool_calls(n: int) -> Condition:
    """Stop once the loop has made `n` tool calls in all (S22).

    The turn that crosses `n` is not cut short: its calls all run.
    """

    def reached(ctx: Context) -> bool:
        return ctx.loop_tool_calls >= n

    return Condition(reached, f"max_tool_calls({n})")


def until_finish_reason(*reasons: str) -> Condition:
    """Stop when the last turn's finish reason is one of `reasons` (S23)."""
    wanted = frozenset(reasons)

    def matched(ctx: Context) -> bool:
        turns = ctx.turns
        return bool(turns) and turns[-1].finish_reason in wanted

    return Condition(matched, f"until_finish_reason({', '.join(map(repr, reasons))})")


def until_text(text: str, *, case_sensitive: bool = False) -> Condition:
    """Stop when the last turn's response contains `text`."""
    needle = text if case_sensitive else text.lower()

    def found(ctx: Context) -> bool:
        t = ctx.turn
        if t is None:
            return False
        hay = t.response if case_sensitive else t.response.lower()
        return needle in hay

    return Condition(found, f"until_text({text!r})")


def stuck(repeats: int = 3) -> Condition:
    """Stop when the loop's last `repeats` tool-calling turns called the same tool with the
    same arguments."""
    if repeats < 2:
        raise ValueError(f"`stuck(repeats)` needs repeats >= 2, got {repeats!r}")

    def repeating(ctx: Context) -> bool:
        keys: list[str] = []
        for turn in reversed(ctx.loop_turns):
            if not turn.tool_calls:
                continue
            keys.append(
                json.dumps(
                    [(c.name, c.arguments) for c in turn.tool_calls], sort_keys=True, default=str
                )
            )
            if len(keys) == repeats:
                break
        return len(keys) == repeats and len(set(keys)) == 1

    return Condition(repeating, f"stuck({repeats})")
