"""The history rules both API adapters follow, written once.

A workflow's history is shared by its agents; a chat API wants one conversation between one
user and one assistant. `AnthropicModel` and `OpenAICompatModel` bridge the two the same way:

- the asking agent owns its own assistant messages, and any message without an agent;
- another agent's turn is user text attributed to it: ``[SecurityAgent] Checking.`` and
  ``[SecurityAgent] called `scan` with {...}`` for each of its native calls;
- rescued calls (found in a model's text) never go on the wire as calls: the text carries
  them, and their results come back as user text;
- a tool message answers the call with its `tool_call_id`, which also tells whose call it
  was; a result that is not sent as the API's own result is user text, ``Your call to `f`
  returned:`` for the asker's call and ``[Scout] `f` returned:`` for another agent's;
- a history that does not start with a user message gets `START_PROMPT` first, and one that
  ends with the asker's own answer gets `CONTINUE_PROMPT` last.

Where a tool result may stand (both APIs want a call's result right after the call: the
Messages API a `tool_result` block at the start of the next `user` message, chat
completions a `tool` message right after the assistant message with the `tool_calls`):

- one of the asker's native calls goes on the wire as the API's own call only when its
  result stands right after the assistant message that made it, among the `tool` messages
  that follow it before any other message (`answered_ids`); the result then goes as the
  API's own result, once;
- any other call is written as text in its assistant message, each API's way, and any
  other result is user text where it stands in the history (`result_text`): a result
  after a user text that came between (a history processor's, a trace's), after another
  agent's turn, a second result for one call, a result whose call was cut. Nothing is
  moved, so the model reads the history in the order it happened.

Arguments, wherever either adapter writes them (the API's own call, another agent's call
as text, a call written as text), are JSON with the keys in the model's own order (as it
gave them; a gate's edit in the order the edit gave them) and non-ASCII text as it is
(`dumps`).

Each adapter keeps what its API requires: the shape of messages and blocks, and how
neighbouring messages are joined.
"""

from __future__ import annotations

import copy
import json
import operator
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any, Generic, Literal, TypeVar

from thena_nb.core.records.types import Message, ToolCall

__all__ = [
    "CONTINUE_PROMPT",
    "START_PROMPT",
    "CallsById",
    "Resumes",
    "answered_call",
    "answered_ids",
    "attributed_turn",
    "dumps",
    "frame",
    "last_assistant",
    "listed",
    "native_calls",
    "note_calls",
    "outcome",
    "owns",
    "plain_copy",
    "read",
    "result_text",
]

CONTINUE_PROMPT = "Continue."
"""The user message sent when the history ends with the asking agent's own answer."""
START_PROMPT = "Begin."
"""The user message sent first when the history does not start with a user message."""

CallsById = dict[str, tuple[str | None, ToolCall]]
"""Each call id with the agent that made the call and the call itself."""

_M = TypeVar("_M")
_S = TypeVar("_S")


def dumps(
    value: object, *, sort_keys: bool = False, default: Callable[[Any], Any] | None = str
) -> str:
    """JSON text of tool arguments for a model to read, non-ASCII characters as they are.

    Args:
        value: What to write, usually a call's `arguments`.
        sort_keys: Write object keys in sorted order instead of their own order.
        default: Turns a value JSON cannot encode into one it can (`str` by default);
            `None` raises `TypeError` for such a value instead.

    Returns:
        The JSON text.
    """
    encode = _ENCODERS.get((sort_keys, default))
    if encode is None:
        encode = json.JSONEncoder(ensure_ascii=False, sort_keys=sort_keys, default=default).encode
        if len(_ENCODERS) < _MAX_ENCODERS:
            _ENCODERS[sort_keys, default] = encode
    return encode(value)


_ENCODERS: dict[tuple[bool, Callable[[Any], Any] | None], Callable[[object], str]] = {}
"""One encoder per option set, reused (`json.dumps` with options builds one per call, which
costs more than writing a call's arguments): a request's render writes the arguments of
every call in the history. An encoder keeps no state between calls."""
_MAX_ENCODERS = 16


def plain_copy(value: Any) -> Any:
    """A deep copy of JSON-shaped data, for a request that must not share a record's dicts
    and lists with whoever reads it.

    The same value as `copy.deepcopy` gives, at a small part of its cost: a request carries
    the arguments of every call in the history, and each tool's schema. Dicts and lists are
    copied, strings, numbers, booleans and `None` kept (they cannot change), and anything
    else is given to `copy.deepcopy`.

    Example:
        >>> arguments = {"city": "Lisbon", "days": [1, 2]}
        >>> copied = plain_copy(arguments)
        >>> copied == arguments, copied["days"] is arguments["days"]
        (True, False)
    """
    kind = type(value)
    if kind is dict:
        return {key: plain_copy(item) for key, item in value.items()}
    if kind is list:
        return [plain_copy(item) for item in value]
    if kind in _UNCHANGING:
        return value
    return copy.deepcopy(value)


_UNCHANGING = frozenset({str, int, float, bool, type(None)})


_REQUIRED: Any = object()


def read(part: Any, name: str, default: Any = _REQUIRED) -> Any:
    """A field of part of a model's answer: a key of the JSON object an adapter reads (the
    body as the server sent it), or an attribute of a record the SDK built (a streamed
    answer's).

    Without `default` the answer must have the field: `KeyError` or `AttributeError` when it
    has not, which the adapter reports as a malformed answer.

    Example:
        >>> read({"type": "text", "text": "Hi"}, "text"), read({"type": "text"}, "citations", None)
        ('Hi', None)
    """
    if isinstance(part, dict):
        return part[name] if default is _REQUIRED else part.get(name, default)
    return getattr(part, name) if default is _REQUIRED else getattr(part, name, default)


def note_calls(calls: CallsById, message: Message) -> None:
    """Add an assistant message's calls to `calls`, the calls of the history so far, as a
    mapping loop meets them: a tool message answers the latest call with its id before it.

    Ids are unique within a run (the executor sees to it), but a history from elsewhere (a
    run stored before it did, a history processor's) may repeat one: a result must not be
    shown as answering a later call that happens to share its id, which another agent may
    have made to another tool.
    """
    for call in message.tool_calls:
        calls[call.id] = (message.agent, call)


def owns(author: str | None, agent: str) -> bool:
    """Whether a message by `author` is `agent`'s own (a message without an agent is)."""
    return author is None or author == agent


def native_calls(message: Message) -> list[ToolCall]:
    """The message's calls that may go on the wire: rescued calls are in its text already."""
    return [call for call in message.tool_calls if call.source == "native"]


def answered_call(message: Message, calls: CallsById) -> tuple[str | None, ToolCall | None]:
    """The call a tool message answers, with the agent that made it.

    Args:
        message: A `tool` message.
        calls: The calls of the history before it (`note_calls`).

    Returns:
        The call's agent and the call; the message's own agent and `None` when the call is
        no longer in the history (a history processor cut it).
    """
    return calls.get(message.tool_call_id or "", (message.agent, None))


def answered_ids(messages: Sequence[Message], i: int) -> set[str]:
    """The call ids that the `tool` messages right after assistant message `i` answer: those
    before any other message. Only these of its calls may go on the wire as the API's own
    calls, with their results as the API's own results (both APIs reject a call left
    unanswered and a result that does not follow its call).

    Example:
        >>> from thena_nb.core.records.types import Message
        >>> calls = [ToolCall(id="c1", name="f"), ToolCall(id="c2", name="f")]
        >>> asked = Message(role="assistant", content="", tool_calls=calls)
        >>> done = Message(role="tool", content="4", tool_call_id="c1")
        >>> later = Message(role="tool", content="5", tool_call_id="c2")
        >>> answered_ids([asked, done, Message(role="user", content="Hm?"), later], 0)
        {'c1'}
    """
    ids: set[str] = set()
    for j in range(i + 1, len(messages)):
        message = messages[j]
        if message.role != "tool":
            break
        if message.tool_call_id is not None:
            ids.add(message.tool_call_id)
    return ids


def outcome(message: Message) -> Literal["failed", "returned"]:
    """How a tool message's call ended, as its user text says it."""
    return "failed" if message.is_error else "returned"


def attributed_turn(message: Message, *, arguments_json: Callable[[object], str] = dumps) -> str:
    """Another agent's assistant message as the user text the asking agent reads.

    Args:
        message: An assistant message of an agent other than the asking one.
        arguments_json: Writes a call's arguments as JSON text.

    Returns:
        One line for its text, if any, and one per native call, each starting `[agent]`;
        `""` when there is nothing to show.
    """
    lines = [f"[{message.agent}] {message.content}"] if message.content.strip() else []
    lines += [
        f"[{message.agent}] called `{call.name}` with {arguments_json(call.arguments)}"
        for call in native_calls(message)
    ]
    return "\n".join(lines)


def result_text(message: Message, *, author: str | None, name: str | None, agent: str) -> str:
    """A tool result as user text for `agent`.

    Args:
        message: The `tool` message.
        author: The agent that made the call.
        name: The called tool's name; `None` when the call is not in the history (a history
            processor cut it).
        agent: The asking agent.

    Returns:
        ``Your call to `name` returned:`` (or ``failed:``) and the result for the asker's own
        call; ``[author] `name` returned:`` and the result for another agent's; ``Call `id`
        returned:`` (``[author] call `id` returned:``) for a call that was cut.
    """
    if name is None:
        label = "Call" if owns(author, agent) else f"[{author}] call"
        who = f"{label} `{message.tool_call_id}`"
    else:
        who = f"Your call to `{name}`" if owns(author, agent) else f"[{author}] `{name}`"
    return f"{who} {outcome(message)}:\n{message.content}"


def frame(messages: list[_M], *, role: Callable[[_M], str], user: Callable[[str], _M]) -> list[_M]:
    """Make the mapped history start with a user message and not end on the assistant.

    Args:
        messages: The mapped messages, changed in place.
        role: The role of a mapped message.
        user: Builds a user message holding the given text.

    Returns:
        `messages`, with `START_PROMPT` first when it did not start with a user message and
        `CONTINUE_PROMPT` last when it ended with the asking agent's own answer.
    """
    if not messages or role(messages[0]) != "user":
        messages.insert(0, user(START_PROMPT))
    if role(messages[-1]) == "assistant":
        messages.append(user(CONTINUE_PROMPT))
    return messages


class Resumes(Generic[_S]):
    """Where the mapping of recent requests' histories stood, so that the next request of a
    run maps only the messages that are new since.

    A run's requests grow by a turn or two each: mapping the whole history for every call
    made a call's render O(N) in the turns so far (as much as the rest of the call at
    N = 200). An adapter's mapping loop keeps its state as it stood before the request's
    last assistant message (`keep`); a later request that starts with the very same message
    objects up to that one (`find`: compared by identity, so an edited or forked history
    never matches where it differs) picks the loop up there. The look-ahead of any earlier
    assistant message (which of its calls are answered) ends at that message, so the state
    is what mapping the whole history would have reached.

    States are kept per asking agent, per option set and per history (its first message),
    the `size` most recent, and each only while its history's first message lives: a run
    that is let go takes its state with it. A kept state is never changed (the adapter
    copies what it goes on changing).

    Example:
        >>> from thena_nb.core.records.types import Message
        >>> history = [Message(role="user", content="Hi"), Message(role="assistant", content="Yo")]
        >>> resumes: Resumes[str] = Resumes()
        >>> resumes.keep(history, 1, "state before message 1", "A")
        >>> resumes.find([*history, Message(role="user", content="More")], "A")
        (1, 'state before message 1')
        >>> resumes.find([Message(role="user", content="Hi")], "A") is None  # other messages
        True
    """

    def __init__(self, size: int = 64) -> None:
        self.size = size
        self._kept: dict[tuple[Any, ...], tuple[weakref.ref[Message], list[Message], _S]] = {}
        self._lock = threading.Lock()  # (a model may serve event loops on several threads)

    def __len__(self) -> int:
        return len(self._kept)

    def find(self, messages: Sequence[Message], *options: Any) -> tuple[int, _S] | None:
        """The state kept for a request that `messages` continue, and the index of the
        message to map next; `None` when none is kept."""
        if not messages:
            return None
        kept = self._kept.get((*options, id(messages[0])))
        if kept is None:
            return None
        first, rest, state = kept
        if (
            first() is not messages[0]
            or len(rest) >= len(messages)
            or not all(map(operator.is_, rest, messages[1:]))
        ):
            return None
        return len(rest), state

    def keep(self, messages: Sequence[Message], at: int, state: _S, *options: Any) -> None:
        """Keep `state`, the mapping loop's as it stood before message `at` of `messages`."""
        key = (*options, id(messages[0]))
        kept = self._kept
        try:  # dropped when the history's first message goes (its run was let go)
            first = weakref.ref(messages[0], _dropper(kept, key))
        except TypeError:  # (an object without weak references: not kept)
            return
        entry = (first, list(messages[1 : at + 1]), state)
        with self._lock:
            kept.pop(key, None)  # (the newest last)
            kept[key] = entry
            while len(kept) > self.size:
                try:
                    del kept[next(iter(kept))]
                except (StopIteration, KeyError, RuntimeError):  # (emptied meanwhile)
                    break

    def clear(self) -> None:
        """Forget every kept state."""
        with self._lock:
            self._kept.clear()


def _dropper(kept: dict[Any, Any], key: Any) -> Callable[[Any], None]:
    """What drops `kept[key]` when the history's first message it was kept for goes."""

    def drop(_: Any) -> None:
        kept.pop(key, None)

    return drop


def listed(messages: Sequence[Message]) -> list[Message]:
    """`messages` as a list of their own, at C speed from a list or a `HistoryView`."""
    seq = messages[:]
    return seq if type(seq) is list else list(seq)


def last_assistant(messages: list[Message], start: int = 0) -> int:
    """The index of the last assistant message at `start` or after; -1 when there is none
    (where a mapping loop keeps its state for `Resumes`)."""
    for i in range(len(messages) - 1, start - 1, -1):
        if messages[i].role == "assistant":
            return i
    return -1
