"""The model boundary: what a live model call returned is checked before the turn uses it.

A reply must be a `Reply` whose token counts are whole numbers from 0 to 2**63 - 1: a
negative count would shrink the run's usage (a budget would never stop it) and a larger one
cannot be stored (SQLite integers are 64-bit) nor put in a frame. `reply_fits` is the check
of every turn, a few integer operations; `check_reply` runs only when it fails and says what
is wrong, naming the model, the agent and the turn.
"""

from __future__ import annotations

from thena_nb.core.errors import ModelError
from thena_nb.core.model import Reply

__all__ = ["TOKEN_COUNTS", "check_reply", "reply_error", "reply_fits"]

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


def reply_fits(reply: object) -> bool:
    """Whether `reply` is a `Reply` whose token counts are all in 0 .. 2**63 - 1.

    One `|` of the counts is negative when any is, and has a bit at 63 or above when any is
    that large. A subclass of `Reply`, or counts that are not integers, give `False`, and
    `check_reply` looks closer.

    Example:
        >>> reply_fits(Reply(text="hi", input_tokens=12)), reply_fits("hi")
        (True, False)
        >>> reply_fits(Reply(output_tokens=-1)), reply_fits(Reply(input_tokens=10**30))
        (False, False)
    """
    try:
        return (
            type(reply) is Reply
            and not (
                reply.input_tokens
                | reply.output_tokens
                | reply.cache_read_tokens
                | reply.cache_write_tokens
                | reply.reasoning_tokens
            )
            >> 63
        )
    except TypeError:  # a count that is no integer (a reply built with `model_construct`)
        return False


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
    where = f"turn {turn} of agent {agent!r}: model {model!r}"
    error = reply_error(reply, model=model, where=where)
    if error is not None:
        raise error


def reply_error(reply: object, *, model: str, where: str) -> TypeError | ModelError | None:
    """What is wrong with `reply` as the error to raise (its message starts with `where`),
    or `None` when nothing is."""
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
                f"{where} reported {name}={value!r}: token counts must be whole numbers from 0 "
                "to 2**63 - 1. The model (or the server behind it) counted wrongly; a custom "
                "model must report the tokens it used, or 0.",
                model_name=model,
            )
    return None
