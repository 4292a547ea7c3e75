"""`@tool`: a Python function as a tool, its JSON schema, argument validation and the one
function that writes every error observation a failed call sends back to the model."""

from __future__ import annotations

import inspect
import json
import re
import traceback
import typing
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol, overload, runtime_checkable

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from thena_nb.core.parts._tool_size import cut_middle
from thena_nb.core.parts._tool_time import TimedOut, checked_timeout, in_thread, within
from thena_nb.core.records._secrets import scrub
from thena_nb.core.records._text import readable, to_text
from thena_nb.core.records.model import ToolSpec
from thena_nb.core.records.types import ToolCall, finished

if typing.TYPE_CHECKING:
    from thena_nb.core.parts.context import Context

__all__ = [
    "MAX_ARGUMENT_DEPTH",
    "SchemaTool",
    "Stopped",
    "Tool",
    "ToolSource",
    "depth_checked",
    "error_observation",
    "exception_text",
    "in_a_thread",
    "readable",
    "run_tool_call",
    "sized",
    "tool",
]

MAX_ARGUMENT_DEPTH = 100
"""How deep a call's arguments may nest (the arguments object is level 1). A deeper call is
refused before it runs and kept cut at this depth, so that every run can be stored and read
back (JSON and pydantic stop near 1000 levels)."""


class Tool:
    """A function the model may call. Build one with `@tool`.

    Attributes:
        name: The name the model calls it by.
        description: What the model is told it does (the docstring by default).
        parameters: The JSON schema of its arguments.
        retries: How many times to run it again after it raises.
        rescue: Whether a call written in the model's text may run it.
        blocking: Run a sync function in a worker thread so it cannot block the event loop.
        gate: `True` to hold every call for a decision before it runs, or a predicate
            `fn(call) -> bool` that says which calls to hold (see `Decision`).
        timeout: Seconds one call may take (`None`: the workflow's `tool_timeout`, if any);
            past it the call is a failed tool call that says so.
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        retries: int = 0,
        rescue: bool = True,
        blocking: bool = False,
        gate: bool | Callable[[ToolCall], bool] = False,
        timeout: float | None = None,
    ) -> None:
        if not callable(fn):
            raise TypeError(f"`@tool` needs a function, got {fn!r}")
        self.fn = fn
        self.name = _checked_name(name if name is not None else getattr(fn, "__name__", ""))
        self.description = description if description is not None else _doc(fn)
        self.retries = retries
        self.rescue = rescue
        self.blocking = blocking
        self.gate = gate
        self.timeout = checked_timeout(timeout, f"tool {self.name!r}")
        self.is_async = inspect.iscoroutinefunction(fn)
        self.takes_ctx, self._args_model = _signature_model(fn, self.name)
        self._validate = self._args_model.__pydantic_validator__.validate_python
        schema = self._args_model.model_json_schema()
        schema.pop("title", None)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
        self.parameters: dict[str, Any] = schema
        self.spec = ToolSpec(name=self.name, description=self.description, parameters=schema)

    def validate(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Validate `arguments` against the signature; raises `pydantic.ValidationError`."""
        return dict(self._validate(arguments).__dict__)

    async def call(
        self, ctx: Context | None, arguments: Mapping[str, Any], *, thread: bool = False
    ) -> str:
        """Validate and run the tool once, returning its result as text; a sync function
        runs in a thread of its own with `blocking` or `thread`."""
        kwargs = self.validate(arguments)
        args: tuple[Any, ...] = (ctx,) if self.takes_ctx else ()
        if self.is_async:
            value = await self.fn(*args, **kwargs)
        elif self.blocking or thread:
            value = await in_thread(self.fn, *args, **kwargs)
        else:
            value = self.fn(*args, **kwargs)
        return to_text(value)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"Tool({self.name!r})"


class SchemaTool(Tool):
    """A tool described by a JSON schema instead of a Python signature, run by an async
    function of its arguments (the tools a `ToolSource` gives are these).

    Args:
        call: `async fn(arguments) -> result`, given the arguments as a dict; the result
            becomes text as a `@tool`'s does.
        name: The name the model calls it by.
        parameters: The JSON schema of its arguments, sent to the model as it is.
        description: What the model is told it does.
        validate: `fn(arguments)` that raises for arguments that do not fit the schema (a
            `pydantic.ValidationError` reads best to the model); without it the arguments go
            to `call` unchecked.
        retries: How many times to run it again after it raises.
        rescue: Whether a call written in the model's text may run it.
        gate: As for `@tool`: hold calls for a decision before they run.
        timeout: As for `@tool`: seconds one call may take.

    Example:
        >>> import asyncio
        >>> from thena_nb.core.parts.tools import SchemaTool
        >>> async def echo(arguments):
        ...     return arguments["text"]
        >>> schema = {"type": "object", "properties": {"text": {"type": "string"}}}
        >>> echo_tool = SchemaTool(echo, name="echo", parameters=schema)
        >>> echo_tool.spec.parameters["properties"]
        {'text': {'type': 'string'}}
        >>> asyncio.run(echo_tool.call(None, {"text": "hi"}))
        'hi'
    """

    def __init__(
        self,
        call: Callable[[dict[str, Any]], Awaitable[Any]],
        *,
        name: str,
        parameters: Mapping[str, Any],
        description: str = "",
        validate: Callable[[dict[str, Any]], Any] | None = None,
        retries: int = 0,
        rescue: bool = True,
        gate: bool | Callable[[ToolCall], bool] = False,
        timeout: float | None = None,
    ) -> None:
        if not callable(call):
            raise TypeError(f"SchemaTool {name!r} needs an async function, got {call!r}")
        super().__init__(
            _no_arguments,
            name=name,
            description=description,
            retries=retries,
            rescue=rescue,
            gate=gate,
            timeout=timeout,
        )
        self.fn = call
        self.is_async = True
        self._check = validate
        self.parameters = dict(parameters)
        self.spec = ToolSpec(name=name, description=description, parameters=self.parameters)

    def validate(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """The arguments as a dict, once `validate` (when given) accepted them."""
        checked = dict(arguments)
        if self._check is not None:
            self._check(checked)
        return checked

    async def call(
        self, ctx: Context | None, arguments: Mapping[str, Any], *, thread: bool = False
    ) -> str:
        """Validate and run the tool once, returning its result as text."""
        return to_text(await self.fn(self.validate(arguments)))


def _no_arguments() -> None:
    """What a `SchemaTool` builds its base from: its own schema replaces this signature's."""


@runtime_checkable
class ToolSource(Protocol):
    """Tools that come from outside the program (an MCP server's), opened once per run.

    Put one in `Agent(tools=[...])` beside `@tool`s. `key` fingerprints the source's
    configuration and stands, in the agent's key, for the tools it will give: request keys
    are known before the source is opened, so a replay whose results are all recorded never
    opens it. `open()` returns an async context manager that yields the tools: a run enters
    it when an agent's first live model call needs them, keeps them for the run's turns, and
    leaves it when the run ends. Entering and leaving may happen in different tasks of the
    run's event loop.
    """

    @property
    def key(self) -> str:
        """A fingerprint of what the source is configured to reach (no secrets in it)."""
        ...

    def open(self) -> AbstractAsyncContextManager[Sequence[Tool]]:
        """Connect, and yield the tools until the run ends."""
        ...


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...
@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    retries: int = 0,
    rescue: bool = True,
    blocking: bool = False,
    gate: bool | Callable[[ToolCall], bool] = False,
    timeout: float | None = None,
) -> Callable[[Callable[..., Any]], Tool]: ...
def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    retries: int = 0,
    rescue: bool = True,
    blocking: bool = False,
    gate: bool | Callable[[ToolCall], bool] = False,
    timeout: float | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Turn a function into a tool an `Agent` can call.

    The JSON schema comes from the signature (through pydantic), the description from the
    docstring. A first parameter annotated `Context` receives the run context and is not
    part of the schema. Sync and async functions both work.

    Args:
        fn: The function (when used as `@tool` without parentheses).
        name: The tool's name; the function's name by default.
        description: What the model is told; the docstring by default.
        retries: Run the tool again up to this many times when it raises.
        rescue: `False` for tools with side effects that must never run from a call found in
            the model's text (sending mail, writing files).
        blocking: Run a sync function in a worker thread (for slow, blocking I/O).
        gate: Hold calls for a decision before they run: `True` for every call, or a
            predicate `fn(call) -> bool`, e.g. `lambda call: call.arguments["amount"] > 100`.
        timeout: Seconds one call may take; past it the call is a failed tool call whose
            observation says so. An async tool is cancelled; a sync one runs in a thread of
            its own, which is abandoned (it may still be running). `None` (the default) takes
            `Workflow(tool_timeout=...)`, if set.

    Example:
        >>> from thena_nb import tool
        >>> @tool
        ... def add(a: int, b: int) -> int:
        ...     '''Add two numbers.'''
        ...     return a + b
        >>> add.spec.parameters["required"]
        ['a', 'b']
    """
    options = dict(
        name=name,
        description=description,
        retries=retries,
        rescue=rescue,
        blocking=blocking,
        gate=gate,
        timeout=timeout,
    )
    if fn is not None:
        return Tool(fn, **options)  # type: ignore[arg-type]

    def decorate(f: Callable[..., Any]) -> Tool:
        return Tool(f, **options)  # type: ignore[arg-type]

    return decorate


def error_observation(
    tool_name: str,
    arguments: Mapping[str, Any],
    *,
    exc: BaseException | None = None,
    available: Sequence[str] = (),
    reason: str | None = None,
) -> str:
    """Write the error observation a failed tool call sends back to the model.

    Every failure goes through here, so the text is the same wherever it is shown:
    it names the tool, shows the arguments, and says what to do next.

    Args:
        tool_name: The name the model used.
        arguments: The arguments the model gave.
        exc: The exception (a `pydantic.ValidationError` for invalid arguments).
        available: The agent's tool names, listed when `tool_name` is unknown.
        reason: A fixed reason instead of an exception (e.g. a refused rescued call).
    """
    shown = _json(arguments)
    if reason is not None:
        return f"Error: tool {tool_name!r} was not run: {reason}"
    if exc is None:
        names = ", ".join(repr(n) for n in available) or "none"
        return f"Error: unknown tool {tool_name!r}. Available tools: {names}."
    if isinstance(exc, TimedOut | Stopped):
        return _cut_short(tool_name, shown, exc)
    if isinstance(exc, ValidationError):
        lines = [f"Error: invalid arguments for tool {tool_name!r} {shown}:"]
        for err in exc.errors(include_url=False):
            field = ".".join(str(p) for p in err["loc"]) or "(arguments)"
            lines.append(f"- {field}: {err['msg']}")
        lines.append("Call the tool again with corrected arguments.")
        return "\n".join(lines)
    return f"Error: tool {tool_name!r} {shown} raised {exception_text(exc)}"


def exception_text(exc: BaseException) -> str:
    """`"KeyError: 'amount'"`: an exception's type and message, even when its `str()` raises
    (the exception is the tool's, or the gate's: any code may have written it)."""
    try:
        said = str(exc)
    except Exception as inner:
        said = f"<unprintable {type(exc).__name__}: its `str()` raised {type(inner).__name__}>"
    return f"{type(exc).__name__}: {said}"


def depth_checked(call: ToolCall) -> ToolCall:
    """`call`, or, when its arguments nest deeper than `MAX_ARGUMENT_DEPTH`, a failed call
    that says so, its arguments cut at the limit (a record that can always be stored)."""
    if call.ok is not None:
        return call
    arguments = call.arguments
    for value in arguments.values():  # most calls: no argument is a dict or a list
        if isinstance(value, _NESTING):
            break
    else:
        return call
    if _within(arguments, MAX_ARGUMENT_DEPTH):
        return call
    cut = _cut(call.arguments, MAX_ARGUMENT_DEPTH)
    reason = (
        f"its arguments nest deeper than {MAX_ARGUMENT_DEPTH} levels; call it again with "
        f"arguments nested less deeply"
    )
    error = error_observation(call.name, cut, reason=reason)
    return finished(call, arguments=cut, ok=False, error=error)


_NESTING = (dict, list, tuple)
"""What a flat call's arguments hold none of: the values `_within` walks into."""


def _within(value: Any, levels: int) -> bool:
    """Whether `value`'s dicts and lists nest at most `levels` deep (without recursion)."""
    stack = [(value, 1)]
    while stack:
        v, depth = stack.pop()
        if isinstance(v, dict):
            items: Any = v.values()
        elif isinstance(v, list | tuple):
            items = v
        else:
            continue
        if depth > levels:
            return False
        stack.extend((x, depth + 1) for x in items)
    return True


def _cut(value: Any, left: int) -> Any:
    """`value` with what nests deeper than `left` levels replaced by a note."""
    if not isinstance(value, _NESTING):
        return value
    if left == 0:
        return "(cut: nested too deep)"
    if isinstance(value, dict):
        return {k: _cut(v, left - 1) for k, v in value.items()}
    return [_cut(v, left - 1) for v in value]


class Stopped(Exception):
    """`Session.stop()` cancelled a tool call while it ran (never raised to the caller: it
    becomes the call's error observation)."""

    def __init__(self, *, abandoned: bool) -> None:
        super().__init__("stopped")
        self.abandoned = abandoned
        """The tool runs in a thread that was left running (a sync tool)."""


def in_a_thread(t: Tool | None) -> bool:
    """Whether `t`'s calls run in a thread of their own (a sync tool that is `blocking` or
    has a time limit), which a stop or a timeout abandons."""
    return t is not None and not t.is_async and (t.blocking or t.timeout is not None)


def _cut_short(tool_name: str, shown: str, exc: TimedOut | Stopped) -> str:
    """The observation of a call cut short by its time limit or by `Session.stop()`."""
    if exc.abandoned:
        how = "; its thread was abandoned and may still be running."
    else:
        how = " and was cancelled."
    if isinstance(exc, Stopped):
        return (
            f"Error: tool {tool_name!r} {shown} was stopped while it ran (the run was stopped){how}"
        )
    where = exc.set_by or "`@tool(timeout=...)` or `Workflow(tool_timeout=...)`"
    return (
        f"Error: tool {tool_name!r} {shown} timed out after {exc.limit:g} s{how} The limit "
        f"is {where}: raise it there if the tool needs longer."
    )


def _limit_of(t: Tool, timeout: float | None) -> tuple[float | None, str]:
    """The call's time limit and where it was set: the tool's own, else the workflow's."""
    if t.timeout is not None:
        return t.timeout, f"the tool's own `{_maker(t)}(timeout={t.timeout:g})`"
    if timeout is not None:
        return timeout, f"the workflow's `Workflow(tool_timeout={timeout:g})`"
    return None, ""


def _maker(t: Tool) -> str:
    """How a tool of `t`'s kind is given a limit: `@tool`, or its class."""
    return "@tool" if type(t) is Tool else type(t).__name__


def sized(done: ToolCall, limit: int | None) -> ToolCall:
    """`done`, its result or error cut to `limit` characters (`cut_middle`) and the cut
    marked (`result_cut`); a traceback is cut to the same limit."""
    if limit is None:
        return done
    c = done.__dict__
    field = "result" if c["ok"] else "error"
    said, shown = c[field], c["traceback"]
    if (said is None or len(said) <= limit) and (shown is None or len(shown) <= limit):
        return done  # the usual case: nothing to cut
    update: dict[str, Any] = {}
    if said is not None and len(said) > limit:
        update[field], update["result_cut"] = cut_middle(said, limit)
    if shown is not None and len(shown) > limit:
        update["traceback"] = cut_middle(shown, limit)[0]
    return finished(done, **update)


async def run_tool_call(
    call: ToolCall,
    tools: Mapping[str, Tool],
    ctx: Context | None,
    *,
    timeout: float | None = None,
    max_chars: int | None = None,
) -> ToolCall:
    """Run one call against `tools` and return the finished call; never raises for a
    failure of the tool itself (it becomes the call's `error`).

    `timeout` is the limit for a tool that sets none itself (`Workflow(tool_timeout=...)`);
    a call that runs past its limit is a failed call, never retried. A result or error
    longer than `max_chars` (`Workflow(max_tool_result_chars=...)`) is cut (`sized`).
    """
    t = tools.get(call.name)
    if t is None:
        error = error_observation(call.name, call.arguments, available=list(tools))
        return sized(finished(call, ok=False, error=error), max_chars)
    return sized(await _run(t, call, ctx, _limit_of(t, timeout)), max_chars)


async def _run(
    t: Tool, call: ToolCall, ctx: Context | None, limit: tuple[float | None, str]
) -> ToolCall:
    """Run `t` for `call`, again after it raises (up to its `retries`), within `limit`."""
    seconds, set_by = limit
    retries = 0
    while True:
        try:
            if seconds is None:
                result = await t.call(ctx, call.arguments)
            else:
                inline = not t.is_async and not t.blocking  # given a thread of its own
                work = (
                    t.call(ctx, call.arguments, thread=True)
                    if inline
                    else t.call(ctx, call.arguments)
                )
                result = await within(work, seconds, abandoned=not t.is_async, set_by=set_by)
        except (ValidationError, TimedOut) as exc:
            error = readable(error_observation(call.name, call.arguments, exc=exc))
            return finished(call, ok=False, error=error, retries=retries)
        except Exception as exc:
            if retries < t.retries:
                retries += 1
                continue
            error = readable(error_observation(call.name, call.arguments, exc=exc))
            shown = readable(_traceback_text(exc))  # for people only: the model gets `error`
            return finished(call, ok=False, error=error, retries=retries, traceback=shown)
        return finished(call, ok=True, result=readable(result), retries=retries)


_TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
"""The tool names the model APIs accept (a name outside it fails only at the first call)."""


def _checked_name(name: str) -> str:
    if not isinstance(name, str) or not _TOOL_NAME.fullmatch(name):
        raise ValueError(
            f"tool name {name!r} is not accepted by the model APIs: use 1 to 64 letters, "
            f'digits, `_` or `-` (e.g. `@tool(name="lookup_order")`)'
        )
    return name


def _traceback_text(exc: BaseException) -> str:
    """The formatted traceback of the attempt that failed last, secrets scrubbed."""
    return scrub("".join(traceback.format_exception(exc)))


def _signature_model(fn: Callable[..., Any], name: str) -> tuple[bool, type[BaseModel]]:
    sig = inspect.signature(fn)
    try:
        hints = typing.get_type_hints(fn)
    except Exception:
        hints = {}
    params = list(sig.parameters.values())
    takes_ctx = False
    if params and _is_context(hints.get(params[0].name, params[0].annotation)):
        takes_ctx = True
        params = params[1:]
    fields: dict[str, Any] = {}
    for p in params:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise TypeError(f"tool {name!r}: *args and **kwargs cannot be described to a model")
        annotation = hints.get(p.name, Any if p.annotation is p.empty else p.annotation)
        default = ... if p.default is p.empty else p.default
        fields[p.name] = (annotation, default)
    model = create_model(f"{name}_arguments", __config__=ConfigDict(extra="forbid"), **fields)
    return takes_ctx, model


def _is_context(annotation: Any) -> bool:
    if isinstance(annotation, str):
        return annotation.split(".")[-1].split("[")[0] == "Context"
    return getattr(annotation, "__name__", None) == "Context" and getattr(
        annotation, "__module__", ""
    ).startswith("thena_nb")


def _doc(fn: Callable[..., Any]) -> str:
    return inspect.cleandoc(fn.__doc__) if fn.__doc__ else ""


def _json(arguments: Mapping[str, Any]) -> str:
    try:
        return json.dumps(dict(arguments), default=str, ensure_ascii=False, sort_keys=False)
    except (TypeError, ValueError):
        return repr(arguments)
