"""The model boundary: what a live model call returned is checked before the turn uses it.

A reply must be a `Reply` whose token counts are whole numbers from 0 to 2**63 - 1: a
negative count would shrink the run's usage (a budget would never stop it) and a larger one
cannot be stored (SQLite integers are 64-bit) nor put in a frame.

`Reply` validates its counts itself when it is made (pydantic's constraints, at no cost to
a turn), so the model phase only checks the type of what came back (`type(reply) is
Reply`); `check_reply` looks closer at anything else, and `refused_reply` turns the
validation error of a `Reply` a model failed to make into a `ModelError`. Both name the
model, the agent and the turn.
"""

from __future__ import annotations

from pydantic import ValidationError

from thena_nb.core.records.errors import ModelError
from thena_nb.core.records.model import Reply

__all__ = ["TOKEN_COUNTS", "check_reply", "refused_reply", "reply_error"]

TOKEN_COUNTS = (
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
)
"""The token counts of a `Reply`."""

_LIMIT = 2**63
_PREVIEW = 80
_COUNTS_RULE = (
    "token counts must be whole numbers from 0 to 2**63 - 1. The model (or the server behind "
    "it) counted wrongly; a custom model must report the tokens it used, or 0."
)


def _where(model: str, agent: str, turn: int) -> str:
    return f"turn {turn} of agent {agent!r}: model {model!r}"


def check_reply(reply: object, *, model: str, agent: str, turn: int) -> None:
    """Raise when `reply` cannot be a turn's reply; return when it can (a sound subclass).

    Args:
        reply: What the model's `respond` returned.
        model: The model's name.
        agent: The asking agent.
        turn: The turn's index in its scope (as `Turn.index`).

    Raises:
        TypeError: `reply` is not a `Reply`.
        ModelError: A token count is not a whole number from 0 to 2**63 - 1.

    Example:
        >>> check_reply("hi", model="mine", agent="A", turn=2)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        TypeError: turn 2 of agent 'A': model 'mine' returned a str ('hi'), not a `Reply`. ...
    """
    error = reply_error(reply, model=model, where=_where(model, agent, turn))
    if error is not None:
        raise error


def reply_error(reply: object, *, model: str, where: str) -> TypeError | ModelError | None:
    """What is wrong with `reply` as the error to raise (its message starts with `where`),
    or `None` when nothing is.

    Example:
        >>> reply_error(Reply(text="hi"), model="m", where="here") is None
        True
        >>> reply_error(Reply.model_construct(input_tokens=-3), model="m", where="here")
        ModelError('here reported input_tokens=-3: token counts must be ...')
    """
    if not isinstance(reply, Reply):
        shown = repr(reply)
        if len(shown) > _PREVIEW:
            shown = f"{shown[: _PREVIEW - 3]}..."
        return TypeError(
            f"{where} returned a {type(reply).__name__} ({shown}), not a `Reply`. A model's "
            "`respond` must return one, e.g. `Reply(text=...)` or `reply.text(...)` (both "
            "from `thena_nb.models`)."
        )
    for name in TOKEN_COUNTS:
        value = getattr(reply, name, None)
        if not isinstance(value, int) or not 0 <= value < _LIMIT:
            return ModelError(
                f"{where} reported {name}={value!r}: {_COUNTS_RULE}", model_name=model
            )
    return None


def refused_reply(
    exc: ValidationError, *, model: str, agent: str, turn: int | None = None
) -> ModelError | None:
    """The error for a model whose `Reply` was refused when it made it (e.g. a negative
    token count), or `None` when `exc` is about something else than a `Reply`. An adapter,
    which does not know the turn, leaves `turn` out.

    Example:
        >>> try:
        ...     Reply(output_tokens=10**30)
        ... except ValidationError as exc:
        ...     print(refused_reply(exc, model="m", agent="A", turn=0))  # doctest: +ELLIPSIS
        turn 0 of agent 'A': model 'm' reported output_tokens=1000000000000000000000000000000: ...
    """
    if exc.title != "Reply":
        return None
    where = f"agent {agent!r}: model {model!r}" if turn is None else _where(model, agent, turn)
    first = exc.errors()[0]
    name = ".".join(str(part) for part in first["loc"])
    if name in TOKEN_COUNTS:
        text = f"{where} reported {name}={first['input']!r}: {_COUNTS_RULE}"
    else:
        text = f"{where} made a `Reply` that is not valid: {exc}"
    return ModelError(text, model_name=model)
