"""A tool call's size limit: `Workflow(max_tool_result_chars=...)`.

A result (or error observation) longer than the limit is cut in `run_tool_call` before the
call is kept in the run's history and sent to the model: its first and last characters stay,
and a note in the middle says how many were cut. The call says so too (`ToolCall.result_cut`).
Cutting slices the text once, so it takes time linear in the result's length.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DEFAULT_MAX_TOOL_RESULT_CHARS", "checked_max_chars", "cut_middle"]

DEFAULT_MAX_TOOL_RESULT_CHARS = 100_000
"""The default limit: about 25,000 tokens, which every current model's context holds with
room to spare, and less than the 200,000 characters a view's "show all" unfolds (so a cut
result can be read whole in the Stepper and on a run's page)."""


def checked_max_chars(value: Any, where: str) -> int | None:
    """`value` as a number of characters (`None`: no limit); a clear error otherwise."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(
            f"{where}: `max_tool_result_chars` must be a positive whole number of characters "
            f"or None (no limit), got {value!r} (e.g. `max_tool_result_chars=100_000`)"
        )
    return int(value)


def cut_middle(text: str, limit: int | None) -> tuple[str, int | None]:
    """`text` and `None` when it has at most `limit` characters; else its first and last
    `limit / 2` characters around a note, and how many characters were cut.

    Example:
        >>> cut_middle("abcdefghij", 4)
        ('ab\\n…[thena_nb cut 6 of 10 characters: max_tool_result_chars=4]…\\nij', 6)
    """
    size = len(text)
    if limit is None or size <= limit:
        return text, None
    cut = size - limit
    tail = limit // 2
    head = limit - tail
    note = f"\n…[thena_nb cut {cut:,} of {size:,} characters: max_tool_result_chars={limit}]…\n"
    return "".join((text[:head], note, text[size - tail :])), cut
