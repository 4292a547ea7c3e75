"""Records of a run: messages, tool calls, turns, loop failures, usage and budgets.

Every record is a pydantic v2 model and round-trips through JSON. Records that describe
something finished are frozen; `Usage` is the one running tally.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Annotated, Any, Generic, Literal, NamedTuple, TypeVar, overload

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer

from thena_nb.core.records import _html

__all__ = [
    "Budget",
    "HistorySpan",
    "HistoryView",
    "LoopFailure",
    "LoopStopReason",
    "Message",
    "Messages",
    "RetryPolicy",
    "RunStatus",
    "SentRequest",
    "ToolCall",
    "ToolCallSource",
    "ToolDecision",
    "Turn",
    "TurnInfo",
    "Usage",
]

LoopStopReason = Literal["until", "exhausted", "fails", "budget", "stop"]
"""Why a loop stopped, as recorded on its report node (S12)."""
ToolCallSource = Literal["native", "rescued"]
"""Where a tool call came from: the API's tool channel, or the model's text (S21)."""
RunStatus = Literal["running", "finished", "stopped", "budget", "failed", "waiting", "abandoned"]
"""How a run stands; `"waiting"`: stopped at a tool gate until its pending calls are decided;
`"abandoned"` (a stored run only): left running by a process that is gone."""
ToolDecision = Literal["approve", "edit", "reject", "respond"]
"""What a person (or an `approve=` function) decided for a gated call."""

# defer_build: a record class builds its validator and serializer when first used, so
# `import thena_nb` does not pay for records a program never makes.
_FROZEN = ConfigDict(frozen=True, extra="forbid", defer_build=True)

_M = TypeVar("_M", bound=BaseModel)
_new = object.__new__
_FIELDS_SET: dict[type[BaseModel], set[str]] = {}
_set = object.__setattr__
# The slots `BaseModel` declares, set through their descriptors: what `object.__setattr__`
# finds for these names after a lookup in the class's whole MRO, without the lookup.
_set_dict = BaseModel.__dict__["__dict__"].__set__
_set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__


def construct(cls: type[_M], values: dict[str, Any]) -> _M:
    """Build a record from values the executor already knows are valid, skipping validation.

    `values` must hold every field. This is `model_construct` without its per-field default
    handling, which costs more than the rest of a turn; it is used on the per-turn hot path.
    """
    obj = _new(cls)
    _set_dict(obj, values)
    # Every field is set, so one shared set per class serves them all: adding a name that
    # is already there (pydantic does on assignment) changes nothing, and each record saves
    # an allocation the garbage collector would otherwise scan on every pass.
    fields_set = _FIELDS_SET.get(cls)
    if fields_set is None:
        fields_set = _FIELDS_SET[cls] = set(cls.model_fields)
    _set_fields_set(obj, fields_set)
    _set_extra(obj, None)
    _set_private(obj, None)
    return obj


_BLANKS: dict[type[BaseModel], dict[str, Any]] = {}


def shares_keys(cls: type[_M]) -> type[_M]:
    """Class decorator: make the template `blank(cls)` copies now, as the class is made.

    The template's keys are shared with the class's instances (a CPython split dict) only
    while no instance has been copied or given other keys: a record loaded from a store and
    copied (`model_copy`) before the first `blank(cls)` would leave every record made after
    it with a dict of its own, up to six times larger. Made here, the template keeps its
    keys whatever happens to the class later.
    """
    holder = _new(cls)
    for name in cls.model_fields:  # set one by one: the instance dict shares its keys
        _set(holder, name, None)
    _BLANKS[cls] = holder.__dict__
    return cls


def blank(cls: type[BaseModel]) -> dict[str, Any]:
    """A values dict for `construct(cls, values)`, every field of `cls` set to `None`, to be
    filled in field by field.

    Its keys are shared with every other dict `blank` makes for `cls` (a CPython split
    dict: each one stores only its values), so a record with many fields built from it
    takes less memory than one built from a dict literal (a turn about a third), and it is
    made faster too. Set every field: `construct` does not check. `cls` must be a class
    made with `@shares_keys`.

    Example:
        >>> values = blank(TurnInfo)
        >>> values["called_tool"], values["response"] = False, "hi"
        >>> construct(TurnInfo, values).response
        'hi'
    """
    return _BLANKS[cls].copy()  # (a copy of a split dict is split too)


def finished(call: ToolCall, **update: Any) -> ToolCall:
    """`call` with its outcome filled in (a copy; records are shared, never changed)."""
    values = call.__dict__.copy()  # keeps the keys shared, where they are (`blank`)
    values.update(update)
    return construct(ToolCall, values)


@shares_keys
class ToolCall(BaseModel):
    """One tool call, native or rescued, with its outcome once it has run."""

    model_config = _FROZEN

    id: str
    """The call's id: the API's for native calls, `rescued-…` for rescued ones."""
    name: str
    """The tool name the model used (it may name no tool of the agent's)."""
    arguments: dict[str, Any] = Field(default_factory=dict)
    """The arguments as the model gave them."""
    source: ToolCallSource = "native"
    """`"native"` for the API's tool channel, `"rescued"` for calls found in text."""
    ok: bool | None = None
    """`True` if the tool ran and returned, `False` if the call failed, `None` before it ran."""
    result: str | None = None
    """What went back to the model when the call worked."""
    error: str | None = None
    """The error observation that went back to the model when the call failed."""
    retries: int = 0
    """How many times the tool was run again after raising (`@tool(retries=N)`)."""
    decision: ToolDecision | None = None
    """What was decided at a tool gate (`Decision`), or `None` for a call no gate held."""
    original_arguments: dict[str, Any] | None = None
    """The model's own arguments when a decision edited them (`arguments` holds the edit)."""
    traceback: str | None = None
    """The formatted traceback of a tool that raised, for people only: never sent to the
    model, secrets scrubbed."""
    result_cut: int | None = None
    """How many characters were cut from the middle of the result (or error) before it was
    kept and sent to the model (`Workflow(max_tool_result_chars=...)`); `None`: nothing."""


@shares_keys
class TurnInfo(BaseModel):
    """The summary of one turn, as `turn_of(ctx)` returns it (S18)."""

    model_config = _FROZEN

    called_tool: bool
    """The model called a tool in this turn, natively or in its text."""
    tool_name: str | None = None
    """The name of the turn's last tool call."""
    tool_error: bool | None = None
    """Any tool call of the turn failed; `None` when no tool was called."""
    tool_call_source: ToolCallSource | None = None
    """`"native"` or `"rescued"`; `None` when no tool was called."""
    response: str = ""
    """The model's text, as it wrote it (`""` when it said nothing)."""

    def _repr_html_(self) -> str:
        return _html.turn_info_html(self)


class LoopFailure(BaseModel):
    """A failed tool call as a loop sees it: passed to `on_fail` and kept on the loop node."""

    model_config = _FROZEN

    consecutive: int
    """Consecutive failed tool calls; a working tool call resets it (S10)."""
    total: int
    """Failed tool calls since this loop began."""
    tool_name: str | None = None
    """The tool name the model used."""
    message: str
    """The error observation that went back to the model (S11)."""


@shares_keys
class Message(BaseModel):
    """One entry of the workflow's history."""

    model_config = _FROZEN

    role: Literal["user", "assistant", "tool"]
    content: str
    agent: str | None = None
    """Which agent wrote it (assistant) or which agent's call it answers (tool)."""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    """Assistant messages: the calls the model made (native or rescued)."""
    tool_call_id: str | None = None
    """Tool messages: the id of the call they answer."""
    is_error: bool = False
    """Tool messages: the call failed and `content` is the error observation."""
    reasoning_blocks: tuple[dict[str, Any], ...] = Field(default=(), repr=False)
    """Assistant messages: the model's reasoning as its provider sent it (opaque data, e.g.
    the Messages API's `thinking` blocks with their signatures), which the same adapter
    sends back unchanged in later requests; never shown as text."""


_T = TypeVar("_T")


class HistoryView(Sequence[_T], Generic[_T]):
    """A read-only view of the first `length` items of an append-only list.

    The executor hands models and contexts a view of the history (and of the turns) instead
    of a copy, so that a turn costs the same at message 10 and at message 10,000.
    """

    __slots__ = ("_items", "_length")

    def __init__(self, items: Sequence[_T] = (), length: int | None = None) -> None:
        self._items = items
        self._length = len(items) if length is None else length

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, index: int) -> _T: ...
    @overload
    def __getitem__(self, index: slice) -> list[_T]: ...
    def __getitem__(self, index: int | slice) -> _T | list[_T]:
        if isinstance(index, slice):
            start, stop, step = index.indices(self._length)
            if step == 1:  # (a slice of the list itself: a copy at C speed)
                part = self._items[start:stop]
                return part if type(part) is list else list(part)
            return [self._items[i] for i in range(start, stop, step)]
        if index < 0:
            index += self._length
        if not 0 <= index < self._length:
            raise IndexError("history index out of range")
        return self._items[index]

    def __iter__(self) -> Iterator[_T]:
        items = self._items
        for i in range(self._length):
            yield items[i]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str):
            return len(other) == self._length and all(
                a == b for a, b in zip(self, other, strict=True)
            )
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"HistoryView({list(self)!r})"


def _dump_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    return [m.model_dump(mode="json") for m in messages]


Messages = Annotated[
    Sequence[Message], PlainSerializer(_dump_messages, return_type=list[dict[str, Any]])
]
"""A sequence of messages (a list or a `HistoryView`) that serialises as a JSON list."""


HistorySpan = tuple[int, int]
"""`(start, stop)`: the history messages at positions `start..stop-1`."""


class SentRequest(NamedTuple):
    """What a turn's model was sent, kept by reference: `run.request_of(turn)` rebuilds it.

    `messages`: the messages sent, in order: spans of the history the turn saw for the ones
    the history processor passed on unchanged, and each message it changed or added as
    sent. `system` and `tools`: the keys of the system prompt and of the list of tool specs
    in `run.request_parts`, where each distinct value is kept once per run. `moved`:
    `(start, by)` for each parallel block merge since, which moved the positions from
    `start` on by `by` (a branch's turn sees the branch's own history; the run holds the
    branches merged). A named tuple, validated by pydantic and written as a JSON object:
    one is kept per turn, and it costs one small allocation.
    """

    messages: tuple[HistorySpan | Message, ...]
    system: str
    tools: str
    max_tokens: int
    moved: tuple[HistorySpan, ...] = ()


def _sent_fields(request: SentRequest) -> dict[str, Any]:
    return request._asdict()


@shares_keys
class Turn(BaseModel):
    """The full record of one turn: one model call and the tool calls it made."""

    model_config = _FROZEN

    index: int
    """0-based, run-wide, in history order."""
    step_path: str
    """Where the turn ran, e.g. `"review/1.loop/0.ExecutorAgent"`."""
    agent: str
    model: str = ""
    """The name of the model asked (the adapter's `name`)."""
    iteration: int | None = None
    """1-based iteration of the innermost loop; `None` outside loops."""
    branch: int | None = None
    """0-based position in the enclosing `parallel` block; `None` outside one."""
    info: TurnInfo
    tool_calls: list[ToolCall] = Field(default_factory=list)
    finish_reason: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    attempts: int = 1
    """Model calls made for this turn (1 + retries)."""
    consecutive_fails: int = 0
    """The enclosing loop's failure streak after this turn."""
    started_at: datetime
    duration_s: float = 0.0
    request_key: str | None = None
    """A fingerprint of what the model was asked (agent, prompt, tools and history); replay
    reuses a recorded turn only while the new run's request has the same key."""
    request: Annotated[SentRequest, PlainSerializer(_sent_fields)] | None = None
    """What the model was sent, by reference (`run.request_of(turn)` gives it in full);
    `None` for turns recorded before requests were kept."""
    replayed: bool = False
    """The reply and tool results were taken from a recorded run: no model call and no tool
    call was made. Usage still counts it, so that a replay reproduces budget stops."""
    reasoning: str | None = None
    """What the model thought before it answered (its reasoning or thinking text), kept
    apart from `info.response`; `None` when it showed none."""
    reasoning_tokens: int = 0
    """Output tokens the model spent on reasoning, when its API reports them."""
    reasoning_blocks: tuple[dict[str, Any], ...] = Field(default=(), repr=False)
    """The provider's reasoning blocks of this turn, as in its assistant message, so that a
    replay puts them back into the history."""

    cost_usd: float | None = None
    """What the model call cost in US dollars, priced by genai-prices from the model's
    provider, name and token counts; `0.0` for a replayed turn (no call was made); `None`
    for an offline model or one whose price is not known."""
    saved_usd: float | None = None
    """A replayed turn's saving: what its call cost when it was first made (`None` for a
    live turn, or when that call had no price)."""
    response_model: str | None = None
    """The model the API says answered, when it says one (e.g. `claude-sonnet-4-5-20250929`
    for the alias asked as `model`); telemetry's `gen_ai.response.model`."""
    response_id: str | None = None
    """The id the API gave the answer, when it gives one (`gen_ai.response.id`)."""

    def _repr_html_(self) -> str:
        return _html.turn_html(self)


@shares_keys
class Usage(BaseModel):
    """Tokens, model calls and tool calls used so far (`ctx.usage`, `run.usage`)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=False, defer_build=True)

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    model_calls: int = 0
    tool_calls: int = 0
    known_cost_usd: float = 0.0
    """US dollars of the turns whose price is known (what `Budget(max_cost_usd=...)` counts)."""
    unpriced_turns: int = 0
    """Live turns whose model has no price (an offline model, or one genai-prices does not
    know)."""
    saved_usd: float = 0.0
    """What the replayed turns' calls cost when they were first made."""

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    @property
    def cost_usd(self) -> float | None:
        """What the model calls cost in US dollars; `None` once a turn had no price, since
        the sum of the others would fall short (`known_cost_usd` still has it).

        Replayed turns cost nothing. Prices come from the data genai-prices ships with:
        nothing is fetched.
        """
        return None if self.unpriced_turns else self.known_cost_usd

    def add(self, reply: Any) -> None:
        """Count the tokens of a `Reply` (or a `Turn`), in place: the one place usage grows.

        Model and tool calls are counted where they are made (every attempt is a model call).
        """
        tally = self.__dict__  # a running tally: skip pydantic's per-field __setattr__
        if reply.input_tokens or reply.output_tokens:
            tally["input_tokens"] += reply.input_tokens
            tally["output_tokens"] += reply.output_tokens
        if reply.cache_read_tokens or reply.cache_write_tokens:
            tally["cache_read_tokens"] += reply.cache_read_tokens
            tally["cache_write_tokens"] += reply.cache_write_tokens

    @classmethod
    def of(cls, turns: Sequence[Turn]) -> Usage:
        """The usage of recorded turns (a replayed turn counts one model call).

        Example:
            >>> from thena_nb import Agent, Usage, Workflow
            >>> from thena_nb.models import ScriptedModel, reply
            >>> model = ScriptedModel([reply.text("hi", input_tokens=7)])
            >>> run = Workflow("w", [Agent("A", model=model)]).run("x", store=False)
            >>> Usage.of(run.turns).input_tokens
            7
        """
        usage = cls()
        for turn in turns:
            usage.add(turn)
            usage.model_calls += max(turn.attempts, 1)
            usage.tool_calls += len(turn.tool_calls)
            usage.add_cost(turn.cost_usd, turn.saved_usd)
        return usage

    def add_cost(self, cost_usd: float | None, saved_usd: float | None = None) -> None:
        """Count one turn's cost (`None`: a turn with no price) and what a replay saved."""
        tally = self.__dict__
        if cost_usd is None:
            tally["unpriced_turns"] += 1
        elif cost_usd:
            tally["known_cost_usd"] += cost_usd
        if saved_usd:
            tally["saved_usd"] += saved_usd


class Budget(BaseModel):
    """Run-wide limits, checked before every model call (S26).

    A limit is spent once the amount used has reached it, so `Budget(max_model_calls=2)`
    allows exactly two model calls. When spent, running loops record `budget` and the run
    ends with status `"budget"`, keeping everything recorded.

    Example:
        >>> Budget(max_tokens=10_000, max_tool_calls=20)
        Budget(max_tokens=10000, max_tool_calls=20)
    """

    model_config = _FROZEN

    max_tokens: int | None = None
    """Input plus output tokens."""
    max_input_tokens: int | None = None
    max_output_tokens: int | None = None
    max_tool_calls: int | None = None
    """Tool calls, failed ones included."""
    max_model_calls: int | None = None
    max_cost_usd: float | None = None
    """US dollars spent on model calls (`Usage.known_cost_usd`): replayed turns cost nothing,
    and turns whose model has no price count nothing."""

    def spent(self, usage: Usage) -> str | None:
        """The first limit `usage` has reached, as a phrase, or `None` while within budget.

        Example:
            >>> Budget(max_cost_usd=0.01).spent(Usage(known_cost_usd=0.0125))
            'max_cost_usd=0.01 reached (0.0125 used)'
        """
        checks = (
            ("max_tokens", self.max_tokens, usage.input_tokens + usage.output_tokens),
            ("max_input_tokens", self.max_input_tokens, usage.input_tokens),
            ("max_output_tokens", self.max_output_tokens, usage.output_tokens),
            ("max_tool_calls", self.max_tool_calls, usage.tool_calls),
            ("max_model_calls", self.max_model_calls, usage.model_calls),
            ("max_cost_usd", self.max_cost_usd, round(usage.known_cost_usd, 9)),
        )
        for name, limit, used in checks:
            if limit is not None and used >= limit:
                return f"{name}={limit} reached ({used} used)"
        return None

    def __repr_args__(self) -> Any:
        return [(k, v) for k, v in super().__repr_args__() if v is not None]


class RetryPolicy(BaseModel):
    """How the executor retries a model call that raised `TransientModelError` (S25).

    The n-th retry waits `min(initial_delay * 2**(n-1), max_delay)` seconds, times a random
    factor in [0.5, 1] with `jitter`, or the server's `retry_after` when that is longer.
    """

    model_config = _FROZEN

    max_retries: int = 3
    initial_delay: float = 0.5
    max_delay: float = 8.0
    jitter: bool = True

    def delay(self, retry: int, retry_after: float | None = None, rand: float = 1.0) -> float:
        """Seconds to wait before retry number `retry` (1-based); `rand` is in [0, 1]."""
        base: float = min(self.initial_delay * 2 ** (retry - 1), self.max_delay)
        if self.jitter:
            base *= 0.5 + 0.5 * rand
        if retry_after is not None and retry_after > base:
            return retry_after
        return base

    def __repr_args__(self) -> Any:
        defaults = RetryPolicy.model_fields
        return [(k, v) for k, v in super().__repr_args__() if k and v != defaults[k].default]
