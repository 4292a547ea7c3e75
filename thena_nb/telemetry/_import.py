"""Runs from OpenTelemetry traces in the GenAI conventions: `runs_from_spans`, `load_otlp`.

Spans come as the SDK's `ReadableSpan`s or as OTLP JSON (`ExportTraceServiceRequest`
documents: one, a list, or JSON lines as a collector's file exporter writes them; ids in hex
as the OTLP JSON spec has them, or base64 as protobuf's `json_format` writes them). They are
first made into one small `_Span` shape, then read by the reader of their dialect:

- `_ThenaReader`: thena_nb's own spans (scope `thena_nb`): a run per `invoke_workflow`, a turn
  per `invoke_agent`, its `chat` spans the turn's attempts, its `execute_tool` spans its calls.
- `_GenAIReader`: the conventions as written: a run per `invoke_agent` (per trace when there
  is none), a turn per `chat`; a tool result is a `tool_call_response` part with `response`.
- `_PydanticAIReader`: pydantic-ai's (scope `pydantic-ai`): as above, but a tool result is a
  user message's `tool_call_response` part with `result`, and the agent span holds the whole
  conversation (`pydantic_ai.all_messages`) and the output (`final_result`).

Every turn gets a content key (`thena_nb.core.engine._replay.content_key`), so that an imported run
can be replayed; without message content the run says so (`content_captured=False`) and a
replay of it is refused.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar, get_args

from thena_nb.core.engine._turn import _turn_info
from thena_nb.core.records._keys import UNCAPTURED_KEY, content_key
from thena_nb.core.records._text import to_text
from thena_nb.core.records.types import Message, RunStatus, ToolCall, Turn, Usage
from thena_nb.core.runs.run import Run
from thena_nb.core.store.base import messages_of, report_from_turns

__all__ = ["ImportedRun", "load_otlp", "runs_from_spans"]

_OPS = frozenset({"invoke_workflow", "invoke_agent", "chat", "execute_tool"})
_STATUSES = frozenset(get_args(RunStatus))


class ImportedRun(Run):
    """A run read from a trace. `source` names the dialect it was read with;
    `content_captured` is `False` when the spans held no messages (names, tokens and timing
    only): such a run can be shown, diffed and scored, not replayed."""

    source: str = ""
    content_captured: bool = True

    def frame(self) -> Any:
        """The turns as a DataFrame (`Run.frame`); without content, a `content_captured`
        column says so."""
        df = super().frame()
        df.attrs["content_captured"] = self.content_captured
        if not self.content_captured:
            df["content_captured"] = False
        return df

    def __repr__(self) -> str:
        shown = super().__repr__()
        extra = f", source={self.source!r}"
        if not self.content_captured:
            extra += ", content_captured=False"
        return f"Imported{shown[:-1]}{extra})"


# -- one shape for every span ------------------------------------------------------------


@dataclass(frozen=True)
class _Span:
    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    start_ns: int
    end_ns: int
    attributes: Mapping[str, Any]
    failed: str | None  # the status description (or `error.type`) of a span that failed
    scope: str

    @property
    def op(self) -> str:
        given = self.attributes.get("gen_ai.operation.name")
        if isinstance(given, str) and given:
            return given
        first = self.name.partition(" ")[0]
        return first if first in _OPS else ""

    def get(self, key: str, default: Any = None) -> Any:
        return self.attributes.get(key, default)

    def number(self, *keys: str) -> int:
        for key in keys:
            value = self.attributes.get(key)
            if isinstance(value, int | float) and not isinstance(value, bool):
                return int(value)
        return 0

    @property
    def started_at(self) -> datetime:
        return datetime.fromtimestamp(self.start_ns / 1e9, UTC)

    @property
    def duration_s(self) -> float:
        return max(self.end_ns - self.start_ns, 0) / 1e9


def _from_sdk(span: Any) -> _Span:
    context, parent = span.context, span.parent
    attributes = dict(span.attributes or {})
    status = span.status
    failed = None
    if getattr(status.status_code, "name", "") == "ERROR":
        failed = status.description or str(attributes.get("error.type") or "error")
    scope = span.instrumentation_scope
    return _Span(
        f"{context.trace_id:032x}",
        f"{context.span_id:016x}",
        f"{parent.span_id:016x}" if parent is not None else None,
        span.name,
        span.start_time or 0,
        span.end_time or span.start_time or 0,
        attributes,
        failed,
        getattr(scope, "name", "") or "",
    )


def _field(data: Mapping[str, Any], camel: str, snake: str) -> Any:
    return data[camel] if camel in data else data.get(snake)


def _id(value: Any, size: int) -> str | None:
    """An id as hex: OTLP JSON writes hex, protobuf's `json_format` base64."""
    if not value:
        return None
    text = str(value)
    if len(text) == 2 * size:
        try:
            bytes.fromhex(text)
            return text.lower()
        except ValueError:
            pass
    try:
        return base64.b64decode(text, validate=True).hex()
    except (binascii.Error, ValueError):
        raise ValueError(f"a span id is neither hex nor base64 ({len(text)} characters)") from None


def _value(v: Mapping[str, Any]) -> Any:
    for camel, snake in (("stringValue", "string_value"), ("boolValue", "bool_value")):
        found = _field(v, camel, snake)
        if found is not None:
            return found
    found = _field(v, "intValue", "int_value")
    if found is not None:
        return int(found)
    found = _field(v, "doubleValue", "double_value")
    if found is not None:
        return float(found)
    array = _field(v, "arrayValue", "array_value")
    if array is not None:
        return tuple(_value(x) for x in array.get("values") or ())
    kvlist = _field(v, "kvlistValue", "kvlist_value")
    if kvlist is not None:
        return {kv["key"]: _value(kv.get("value") or {}) for kv in kvlist.get("values") or ()}
    return None


def _from_otlp(document: Mapping[str, Any]) -> list[_Span]:
    resources = _field(document, "resourceSpans", "resource_spans")
    if not isinstance(resources, list):
        raise ValueError(
            "not OTLP JSON: an ExportTraceServiceRequest document has `resourceSpans`; got "
            f"keys {sorted(map(str, document))[:5]}"
        )
    out = []
    for resource in resources:
        scopes = _field(resource, "scopeSpans", "scope_spans") or resource.get(
            "instrumentationLibrarySpans", ()
        )
        for scoped in scopes:
            scope = scoped.get("scope") or scoped.get("instrumentationLibrary") or {}
            for s in scoped.get("spans") or ():
                attributes = {
                    kv["key"]: _value(kv.get("value") or {}) for kv in s.get("attributes") or ()
                }
                status = s.get("status") or {}
                code = status.get("code")
                failed = None
                if code in (2, "STATUS_CODE_ERROR"):
                    failed = status.get("message") or str(attributes.get("error.type") or "error")
                start = int(_field(s, "startTimeUnixNano", "start_time_unix_nano") or 0)
                end = int(_field(s, "endTimeUnixNano", "end_time_unix_nano") or start)
                out.append(
                    _Span(
                        _id(_field(s, "traceId", "trace_id"), 16) or "",
                        _id(_field(s, "spanId", "span_id"), 8) or "",
                        _id(_field(s, "parentSpanId", "parent_span_id"), 8),
                        str(s.get("name", "")),
                        start,
                        end,
                        attributes,
                        failed,
                        str(scope.get("name", "")),
                    )
                )
    return out


def _documents(text: str) -> list[Any]:
    """One JSON document, or JSON lines of them."""
    try:
        whole = json.loads(text)
    except json.JSONDecodeError:
        pass
    else:
        return whole if isinstance(whole, list) else [whole]
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            raise ValueError(
                f"not OTLP JSON: line {number} is not JSON (expected an "
                f"ExportTraceServiceRequest document, or JSON lines of them)"
            ) from None
    return out


def _spans_of(source: Any) -> list[_Span]:
    if isinstance(source, bytes):
        source = source.decode("utf-8")
    if isinstance(source, str):
        docs = _documents(source)
    elif isinstance(source, Mapping):
        docs = [source]
    else:
        items = list(source)
        if all(isinstance(i, Mapping) for i in items):
            docs = items
        else:
            bad = [i for i in items if not (hasattr(i, "context") and hasattr(i, "attributes"))]
            if bad:
                raise TypeError(
                    f"expected OpenTelemetry SDK spans (ReadableSpan) or OTLP JSON; got "
                    f"{type(bad[0]).__name__}"
                )
            return [_from_sdk(i) for i in items]
    out = []
    for doc in docs:
        if not isinstance(doc, Mapping):
            raise ValueError(f"not OTLP JSON: a document is a {type(doc).__name__}, not an object")
        out.extend(_from_otlp(doc))
    return out


# -- message JSON ------------------------------------------------------------------------


def _json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def _arguments(value: Any) -> dict[str, Any]:
    value = _json(value)
    return dict(value) if isinstance(value, Mapping) else {}


def _text(parts: Iterable[Mapping[str, Any]], *kinds: str) -> str:
    return "".join(str(p.get("content", "")) for p in parts if p.get("type") in kinds)


@dataclass
class _Output:
    text: str
    calls: list[ToolCall]
    reasoning: str | None
    finish: str | None


def _output(span: _Span) -> _Output | None:
    raw = _json(span.get("gen_ai.output.messages"))
    if not isinstance(raw, list):
        return None
    parts = [p for m in raw if isinstance(m, Mapping) for p in m.get("parts") or ()]
    calls = [
        ToolCall(
            id=str(p.get("id") or ""),
            name=str(p.get("name", "")),
            arguments=_arguments(p.get("arguments")),
        )
        for p in parts
        if p.get("type") == "tool_call"
    ]
    thought = _text(parts, "reasoning", "thinking")
    finish = next((m.get("finish_reason") for m in raw if isinstance(m, Mapping)), None)
    return _Output(_text(parts, "text"), calls, thought or None, finish)


# -- readers -----------------------------------------------------------------------------


class _Trace:
    """One trace's spans, by id and by parent."""

    def __init__(self, spans: Sequence[_Span]) -> None:
        self.spans = sorted(spans, key=lambda s: (s.start_ns, s.end_ns))
        self.children: dict[str | None, list[_Span]] = {}
        for s in self.spans:
            self.children.setdefault(s.parent_id, []).append(s)

    def below(self, span: _Span, stop: str = "") -> list[_Span]:
        """The spans under `span` in start order, not entering spans of operation `stop`."""
        out, todo = [], list(self.children.get(span.span_id, ()))
        while todo:
            s = todo.pop()
            out.append(s)
            if not stop or s.op != stop:
                todo.extend(self.children.get(s.span_id, ()))
        return sorted(out, key=lambda s: (s.start_ns, s.end_ns))


def _result(call: ToolCall, tool: _Span | None, told: Message | None) -> ToolCall:
    """`call` with the outcome its `execute_tool` span or a later request tells."""
    source = tool.get("thena.tool_call.source", "native") if tool is not None else "native"
    update: dict[str, Any] = {"source": source if source in ("native", "rescued") else "native"}
    if tool is not None:
        update["retries"] = tool.number("thena.tool_call.retries")
        update["result_cut"] = tool.number("thena.tool_call.result_cut") or None
        update["decision"] = tool.get("thena.tool_call.decision")
        if not call.arguments and tool.get("gen_ai.tool.call.arguments") is not None:
            update["arguments"] = _arguments(tool.get("gen_ai.tool.call.arguments"))
    text = told.content if told is not None else None
    if text is None and tool is not None and tool.get("gen_ai.tool.call.result") is not None:
        text = to_text(tool.get("gen_ai.tool.call.result"))
    failed = (tool is not None and tool.failed is not None) or (told is not None and told.is_error)
    if text is not None or tool is not None:
        update["ok"] = not failed
        update["result" if not failed else "error"] = text if text is not None else ""
    return call.model_copy(update=update)


def _finish(run: ImportedRun, turns: list[Turn], history: list[Message], captured: bool) -> None:
    if not captured:
        turns = [t.model_copy(update={"request_key": UNCAPTURED_KEY}) for t in turns]
    else:
        keyed, at = [], len(run.history)
        for t, added in zip(turns, (messages_of(t) for t in turns), strict=True):
            keyed.append(t.model_copy(update={"request_key": content_key(history[:at])}))
            at += len(added)
        turns = keyed
    run.turns = turns
    run.history = history
    run.usage = Usage.of(turns)
    run.content_captured = captured
    if run.output is None and turns:
        run.output = turns[-1].info.response


class _ThenaReader:
    """thena_nb's own spans: a run per `invoke_workflow`, a turn per `invoke_agent`."""

    source = "thena_nb"

    def runs(self, trace: _Trace) -> list[ImportedRun]:
        return [self.run(trace, s) for s in trace.spans if s.op == "invoke_workflow"]

    def run(self, trace: _Trace, root: _Span) -> ImportedRun:
        below = trace.below(root)
        turn_spans = [s for s in below if s.op == "invoke_agent"]
        inputs = self._inputs(trace, turn_spans)
        first = next((m for m in inputs if m.role == "user"), None)
        name = str(root.get("gen_ai.workflow.name") or root.name.partition(" ")[2] or "trace")
        run = _new_run(self.source, name, first.content if first else "", root)
        run.run_id = str(root.get("gen_ai.conversation.id") or root.span_id)
        status = root.get("thena.run.status")
        if status in _STATUSES:
            run.status = status
        told = {m.tool_call_id: m for m in inputs if m.role == "tool"}
        turns, history, captured = [], list(run.history), True
        seen: dict[tuple[str | None, str], int] = {}
        for index, span in enumerate(turn_spans):
            turn, had = self.turn(trace, span, index, told, seen)
            captured = captured and had
            turns.append(turn)
            history.extend(messages_of(turn))
        _finish(run, turns, history, captured)
        run.report = report_from_turns(name, run.turns)
        self._loops(run, [s for s in below if s.name.startswith("thena.loop ")])
        return run

    def _inputs(self, trace: _Trace, turns: list[_Span]) -> list[Message]:
        """The messages of every request, in order (the first user message is the input)."""
        out: list[Message] = []
        for span in turns:
            for chat in trace.children.get(span.span_id, ()):
                if chat.op == "chat":
                    out.extend(_messages(chat.get("gen_ai.input.messages"), "response"))
        return out

    def turn(
        self,
        trace: _Trace,
        span: _Span,
        index: int,
        told: Mapping[str | None, Message],
        seen: dict[tuple[str | None, str], int],
    ) -> tuple[Turn, bool]:
        kids = trace.children.get(span.span_id, ())
        chats = [c for c in kids if c.op == "chat"]
        answered = next((c for c in reversed(chats) if c.failed is None), None)
        out = _output(answered) if answered is not None else None
        tools = {str(t.get("gen_ai.tool.call.id")): t for t in kids if t.op == "execute_tool"}
        if out is not None:
            proposed = out.calls
        else:  # no content: the calls the spans name
            proposed = [
                ToolCall(id=i, name=str(t.get("gen_ai.tool.name", ""))) for i, t in tools.items()
            ]
        done = [_result(c, tools.get(c.id), told.get(c.id)) for c in proposed]
        path = str(span.get("thena.step.path") or span.get("gen_ai.agent.name") or "")
        key = (span.parent_id, path)
        seen[key] = seen.get(key, 0) + 1
        parent = next((s for s in trace.spans if s.span_id == span.parent_id), None)
        in_loop = parent is not None and parent.name.startswith("thena.loop ")
        cached = span.number("gen_ai.usage.cache_read.input_tokens")
        written = span.number("gen_ai.usage.cache_creation.input_tokens")
        extra = cached + written if span.get("gen_ai.provider.name") == "anthropic" else 0
        finish = span.get("gen_ai.response.finish_reasons") or (None,)
        text = out.text if out is not None else ""
        turn = Turn(
            index=index,
            step_path=path,
            agent=str(span.get("gen_ai.agent.name") or span.name.partition(" ")[2]),
            model=str(span.get("gen_ai.request.model") or ""),
            iteration=seen[key] if in_loop else None,
            branch=_branch(path),
            info=_turn_info(text, done),
            tool_calls=done,
            finish_reason=finish[0],
            input_tokens=span.number("gen_ai.usage.input_tokens") - extra,
            output_tokens=span.number("gen_ai.usage.output_tokens"),
            cache_read_tokens=cached,
            cache_write_tokens=written,
            attempts=span.number("thena.turn.attempts")
            if "thena.turn.attempts" in span.attributes
            else len(chats),
            consecutive_fails=span.number("thena.turn.consecutive_fails"),
            started_at=span.started_at,
            duration_s=span.duration_s,
            replayed=bool(span.get("thena.turn.replayed", False)),
            reasoning=out.reasoning if out is not None else None,
        )
        return turn, out is not None

    def _loops(self, run: ImportedRun, loops: list[_Span]) -> None:
        """The loop nodes' stop reasons and counts, from the `thena.loop` spans in order."""
        by_path: dict[str, list[_Span]] = {}
        for s in loops:
            by_path.setdefault(str(s.get("thena.step.path", "")), []).append(s)
        for node in run.loops:
            found = by_path.get(node.path)
            if not found:
                continue
            s = found.pop(0)
            node.stop_reason = s.get("thena.loop.stop_reason")
            node.iterations = s.number("thena.loop.iterations") or node.iterations
            node.max_iterations = s.get("thena.loop.max_iterations")
            fails = s.get("thena.loop.max_fails")
            node.max_fails = float(fails) if fails is not None else float("inf")
            if s.failed is not None:
                node.error = s.failed


class _GenAIReader:
    """The GenAI conventions as written: a run per `invoke_agent` (per trace without one), a
    turn per `chat`, a tool result a `tool_call_response` part with `response`."""

    source = "genai"
    result_key: ClassVar[str] = "response"

    def runs(self, trace: _Trace) -> list[ImportedRun]:
        agents = [s for s in trace.spans if s.op == "invoke_agent"]
        if not agents:
            root = _Span(trace.spans[0].trace_id, "", None, "trace", trace.spans[0].start_ns,
                         max(s.end_ns for s in trace.spans), {}, None, "")  # fmt: skip
            return [self.run(root, trace.spans)]
        return [self.run(a, trace.below(a, stop="invoke_agent")) for a in agents]

    def conversation(self, root: _Span) -> list[Message]:
        """The whole conversation, when the agent span holds it."""
        return []

    def run(self, root: _Span, below: list[_Span]) -> ImportedRun:
        chats = [s for s in below if s.op == "chat"]
        tools = {str(s.get("gen_ai.tool.call.id")): s for s in below if s.op == "execute_tool"}
        agent = str(
            root.get("gen_ai.agent.name")
            or next((c.get("gen_ai.agent.name") for c in chats if c.get("gen_ai.agent.name")), "")
            or root.name.partition(" ")[2]
            or "agent"
        )
        said = [_messages(c.get("gen_ai.input.messages"), self.result_key) for c in chats]
        first = said[0] if said else []
        user = next((m for m in first if m.role == "user"), None)
        run = _new_run(self.source, agent, user.content if user else "", root)
        run.run_id = root.span_id or root.trace_id
        if first:
            run.history = first
        told = {
            m.tool_call_id: m
            for ms in [*said, self.conversation(root)]
            for m in ms
            if m.role == "tool"
        }
        history = list(run.history)
        turns: list[Turn] = []
        captured, attempts = True, 0
        for chat in chats:
            attempts += 1
            if chat.failed is not None:
                continue  # a failed attempt: the next one answers, or the run failed
            out = _output(chat)
            captured = captured and out is not None
            turn = self.turn(chat, out, len(turns), agent, attempts, tools, told)
            turns.append(turn)
            history.extend(messages_of(turn))
            attempts = 0
        failed = root.failed or (chats[-1].failed if chats and attempts else None)
        if failed is not None:
            run.status, run.error = "failed", failed
        final = root.get("final_result")
        if final is not None and run.status == "finished":
            run.output = final
        _finish(run, turns, history, captured and bool(chats))
        run.report = report_from_turns(agent, run.turns)
        return run

    def turn(
        self,
        chat: _Span,
        out: _Output | None,
        index: int,
        agent: str,
        attempts: int,
        tools: Mapping[str, _Span],
        told: Mapping[str | None, Message],
    ) -> Turn:
        proposed = out.calls if out is not None else []
        done = [_result(c, tools.get(c.id), told.get(c.id)) for c in proposed]
        finish = chat.get("gen_ai.response.finish_reasons") or (out.finish if out else None,)
        return Turn(
            index=index,
            step_path=f"{agent}/0.{agent}",  # as `Workflow.of(agent)` runs it
            agent=agent,
            model=str(chat.get("gen_ai.request.model") or chat.get("gen_ai.response.model") or ""),
            info=_turn_info(out.text if out is not None else "", done),
            tool_calls=done,
            finish_reason=finish[0],
            input_tokens=chat.number("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens"),
            output_tokens=chat.number(
                "gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens"
            ),
            cache_read_tokens=chat.number(
                "gen_ai.usage.cache_read.input_tokens", "gen_ai.usage.details.cache_read_tokens"
            ),
            cache_write_tokens=chat.number(
                "gen_ai.usage.cache_creation.input_tokens",
                "gen_ai.usage.details.cache_write_tokens",
            ),
            attempts=attempts,
            started_at=chat.started_at,
            duration_s=chat.duration_s,
            reasoning=out.reasoning if out is not None else None,
            response_model=chat.get("gen_ai.response.model"),
        )


class _PydanticAIReader(_GenAIReader):
    """pydantic-ai's spans: a tool result is a user message's `tool_call_response` part with
    `result`; the agent span holds the conversation and the output."""

    source = "pydantic-ai"
    result_key = "result"

    def conversation(self, root: _Span) -> list[Message]:
        return _messages(root.get("pydantic_ai.all_messages"), self.result_key)


def _messages(raw: Any, result_key: str) -> list[Message]:
    """Input messages as thena_nb's: system messages left out (they are the instructions),
    tool results as `tool` messages, reasoning left out (kept on the turn)."""
    raw = _json(raw)
    if not isinstance(raw, list):
        return []
    out: list[Message] = []
    for m in raw:
        if not isinstance(m, Mapping) or m.get("role") == "system":
            continue
        parts = [p for p in m.get("parts") or () if isinstance(p, Mapping)]
        if m.get("role") == "assistant":
            calls = [
                ToolCall(
                    id=str(p.get("id") or ""),
                    name=str(p.get("name", "")),
                    arguments=_arguments(p.get("arguments")),
                )
                for p in parts
                if p.get("type") == "tool_call"
            ]
            out.append(Message(role="assistant", content=_text(parts, "text"), tool_calls=calls))
            continue
        for p in parts:
            if p.get("type") == "tool_call_response":
                value = p.get(result_key, p.get("response", p.get("result")))
                out.append(
                    Message(
                        role="tool",
                        content=to_text(value),
                        tool_call_id=str(p.get("id") or "") or None,
                    )
                )
        text = _text(parts, "text")
        if text or not parts:
            out.append(Message(role="user", content=text))
    return out


def _branch(path: str) -> int | None:
    parts = path.split("/")
    found = None
    for i, part in enumerate(parts[:-1]):
        position = parts[i + 1].partition(".")[0]
        if part.endswith(".parallel") and position.isdigit():
            found = int(position)
    return found


def _new_run(source: str, name: str, input: str, root: _Span) -> ImportedRun:
    run = ImportedRun(workflow_name=name, input=input)
    run.source = source
    run.status = "failed" if root.failed is not None else "finished"
    run.error = root.failed
    run.started_at = root.started_at
    run.finished_at = datetime.fromtimestamp(root.end_ns / 1e9, UTC)
    return run


def _reader(trace: _Trace) -> _ThenaReader | _GenAIReader:
    spans = trace.spans
    if any(
        s.op == "invoke_workflow" and (s.scope == "thena_nb" or "thena.run.status" in s.attributes)
        for s in spans
    ):
        return _ThenaReader()
    if any(s.scope == "pydantic-ai" or "pydantic_ai.all_messages" in s.attributes for s in spans):
        return _PydanticAIReader()
    return _GenAIReader()


# -- the two public functions ------------------------------------------------------------


def runs_from_spans(spans: Any) -> list[Run]:
    """Runs from OpenTelemetry spans in the GenAI conventions.

    One run per agent invocation (`invoke_agent`; thena_nb's own spans: per
    `invoke_workflow`), or per trace when there is none; a turn per model call (`chat`), its
    tool calls from `execute_tool` spans (or from the messages when tools were not traced),
    tokens, model, timing and errors (span status). With message content (the
    instrumentation's content capture on), `Workflow.run(input, replay=run)` serves the
    model's answers from the trace; without it, the run says so (`content_captured=False`)
    and a replay of it is refused.

    Args:
        spans: The SDK's finished spans (`ReadableSpan`s, e.g. an `InMemorySpanExporter`'s),
            or OTLP JSON: an `ExportTraceServiceRequest` document (a dict), a list of them, or
            their text (one document, or JSON lines).

    Returns:
        The runs, in the order their traces started.

    Raises:
        ValueError: The input is not OTLP JSON, or it holds no GenAI span.
        TypeError: The items are neither SDK spans nor OTLP JSON.

    Example:
        >>> from opentelemetry.sdk.trace import TracerProvider
        >>> from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        >>> from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
        ...     InMemorySpanExporter)
        >>> from thena_nb import Agent, Workflow, telemetry
        >>> from thena_nb.models import ScriptedModel
        >>> exporter = InMemorySpanExporter()
        >>> provider = TracerProvider()
        >>> provider.add_span_processor(SimpleSpanProcessor(exporter))
        >>> telemetry.instrument(provider, capture_content=True)
        >>> run = Workflow("hello", [Agent("A", model=ScriptedModel(["hi"]))]).run(
        ...     "go", store=False)
        >>> telemetry.uninstrument()
        >>> [back] = telemetry.runs_from_spans(exporter.get_finished_spans())
        >>> back.run_id == run.run_id, back.output, back.turns[0].agent
        (True, 'hi', 'A')
    """
    every = _spans_of(spans)
    genai = {s.trace_id for s in every if s.op in _OPS}
    found = [s for s in every if s.trace_id in genai]  # loops and other spans link the tree
    if not found:
        raise ValueError(
            "no GenAI spans: none has `gen_ai.operation.name` invoke_workflow, invoke_agent, "
            "chat or execute_tool (are these spans from a GenAI instrumentation?)"
        )
    traces: dict[str, list[_Span]] = {}
    for s in found:
        traces.setdefault(s.trace_id, []).append(s)
    out: list[ImportedRun] = []
    for spans_of_trace in sorted(traces.values(), key=lambda ss: min(s.start_ns for s in ss)):
        trace = _Trace(spans_of_trace)
        out.extend(_reader(trace).runs(trace))
    return list(out)


def load_otlp(path: str | os.PathLike[str]) -> list[Run]:
    """Runs from an OTLP JSON file: one `ExportTraceServiceRequest` document, or JSON lines
    of them as a collector's file exporter writes (see `runs_from_spans`).

    Raises:
        ValueError: The file is not OTLP JSON, or holds no GenAI span.

    Example:
        >>> import pathlib, tempfile
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     path = pathlib.Path(tmp) / "traces.jsonl"
        ...     _ = path.write_text('{"resourceSpans": []}')
        ...     load_otlp(path)
        Traceback (most recent call last):
        ...
        ValueError: no GenAI spans: ...
    """
    return runs_from_spans(Path(path).read_text(encoding="utf-8"))
