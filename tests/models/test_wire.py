"""The history rules both API adapters share (`thena_nb.models._wire`).

These test a private module because both adapters depend on it: a rule changed here changes
what every API is sent, so each rule is pinned once, and the adapters are checked to agree.
"""

from __future__ import annotations

import copy
import datetime
from typing import Any

import pytest

from thena_nb.core.records.types import Message, ToolCall
from thena_nb.models import _wire, openai_compat
from thena_nb.models import anthropic as anthropic_adapter


def user(content: str) -> Message:
    return Message(role="user", content=content)


def said(agent: str | None, content: str, *calls: ToolCall) -> Message:
    return Message(role="assistant", content=content, agent=agent, tool_calls=list(calls))


def call(call_id: str, name: str, *, rescued: bool = False, **arguments: Any) -> ToolCall:
    source = "rescued" if rescued else "native"
    return ToolCall(id=call_id, name=name, arguments=arguments, source=source)


def result(
    agent: str | None, call_id: str | None, content: str, *, failed: bool = False
) -> Message:
    return Message(role="tool", content=content, agent=agent, tool_call_id=call_id, is_error=failed)


# --- whose message is whose ------------------------------------------------------------


def test_owns_counts_a_message_without_an_agent_as_the_askers() -> None:
    """The run input and messages a history processor added carry no agent."""
    assert _wire.owns(None, "Exec")
    assert _wire.owns("Exec", "Exec")
    assert not _wire.owns("Scout", "Exec")


def _noted(*messages: Message) -> _wire.CallsById:
    calls: _wire.CallsById = {}
    for message in messages:
        _wire.note_calls(calls, message)
    return calls


def test_note_calls_names_the_agent_of_every_call() -> None:
    first, second = call("c1", "search", q="a"), call("c2", "lookup", rescued=True)
    calls = _noted(user("hi"), said("Scout", "", first), said("Exec", "", second))
    assert calls == {"c1": ("Scout", first), "c2": ("Exec", second)}


def test_note_calls_keeps_the_latest_call_of_a_repeated_id() -> None:
    """Ids should be unique; when they are not, a result answers the latest call before it."""
    early, late = call("c1", "old"), call("c1", "new")
    assert _noted(said("A", "", early)) == {"c1": ("A", early)}
    assert _noted(said("A", "", early), said("B", "", late)) == {"c1": ("B", late)}


def test_native_calls_leave_rescued_calls_out() -> None:
    native, rescued = call("c1", "f"), call("rescued-1", "g", rescued=True)
    assert _wire.native_calls(said("A", "", native, rescued)) == [native]


# --- the call a result answers -----------------------------------------------------------


def test_answered_call_finds_the_call_and_its_agent() -> None:
    made = call("c1", "search")
    calls = _noted(said("Scout", "", made))
    assert _wire.answered_call(result("Scout", "c1", "ok"), calls) == ("Scout", made)


@pytest.mark.parametrize("call_id", ["gone", None])
def test_answered_call_of_a_cut_call_is_none(call_id: str | None) -> None:
    """A history processor may drop the call and keep its result."""
    message = result("Scout", call_id, "ok")
    assert _wire.answered_call(message, {}) == ("Scout", None)


def test_outcome() -> None:
    assert _wire.outcome(result("A", "c1", "4")) == "returned"
    assert _wire.outcome(result("A", "c1", "boom", failed=True)) == "failed"


# --- text for the asking agent -------------------------------------------------------------


def test_attributed_turn_has_a_line_for_the_text_and_for_each_native_call() -> None:
    message = said(
        "Scout",
        "Checking.",
        call("c1", "get_weather", city="Faro"),
        call("rescued-1", "hidden", rescued=True),
        call("c2", "scan"),
    )
    assert _wire.attributed_turn(message) == (
        "[Scout] Checking.\n"
        '[Scout] called `get_weather` with {"city": "Faro"}\n'
        "[Scout] called `scan` with {}"
    )


def test_attributed_turn_without_text_or_native_calls_is_empty() -> None:
    assert _wire.attributed_turn(said("Scout", "  \n")) == ""
    assert _wire.attributed_turn(said("Scout", " ", call("r", "f", rescued=True))) == ""
    assert (
        _wire.attributed_turn(said("Scout", " ", call("c1", "f"))) == "[Scout] called `f` with {}"
    )


def test_attributed_turn_writes_arguments_with_the_given_dumper() -> None:
    message = said("Scout", "", call("c1", "f", b=1, a=2))
    assert _wire.attributed_turn(message) == '[Scout] called `f` with {"b": 1, "a": 2}'
    sorted_json = _wire.attributed_turn(
        message, arguments_json=lambda value: _wire.dumps(value, sort_keys=True)
    )
    assert sorted_json == '[Scout] called `f` with {"a": 2, "b": 1}'


def test_result_text_for_the_askers_call_and_for_another_agents() -> None:
    done, failed = result("Exec", "c1", "sunny"), result("Scout", "c2", "Error: x", failed=True)
    own = _wire.result_text(done, author="Exec", name="get_weather", agent="Exec")
    assert own == "Your call to `get_weather` returned:\nsunny"
    other = _wire.result_text(failed, author="Scout", name="get_weather", agent="Exec")
    assert other == "[Scout] `get_weather` failed:\nError: x"
    unnamed = _wire.result_text(done, author=None, name="f", agent="Exec")
    assert unnamed == "Your call to `f` returned:\nsunny"


def test_dumps_keeps_non_ascii_text_and_key_order() -> None:
    assert _wire.dumps({"city": "Zürich", "a": 1}) == '{"city": "Zürich", "a": 1}'
    assert _wire.dumps({"b": 1, "a": 2}, sort_keys=True) == '{"a": 2, "b": 1}'


def test_dumps_writes_what_json_cannot_encode_as_text_unless_told_not_to() -> None:
    day = datetime.date(2026, 1, 2)
    assert _wire.dumps({"day": day}) == '{"day": "2026-01-02"}'
    with pytest.raises(TypeError):
        _wire.dumps({"day": day}, default=None)


# --- opening and continuation prompts ----------------------------------------------------


def _frame(roles: list[str]) -> list[str]:
    return _wire.frame(roles, role=lambda role: role.split(":")[0], user=lambda t: f"user:{t}")


@pytest.mark.parametrize(
    ("roles", "framed"),
    [
        ([], ["user:Begin."]),
        (["user:hi"], ["user:hi"]),
        (["user:hi", "assistant:yes"], ["user:hi", "assistant:yes", "user:Continue."]),
        (["assistant:yes"], ["user:Begin.", "assistant:yes", "user:Continue."]),
        (["assistant:call", "tool:4"], ["user:Begin.", "assistant:call", "tool:4"]),
    ],
)
def test_frame(roles: list[str], framed: list[str]) -> None:
    """The history starts with a user message and never ends on the assistant's answer."""
    assert _frame(list(roles)) == framed


def test_frame_changes_the_list_in_place() -> None:
    roles = ["assistant:yes"]
    assert _frame(roles) is roles
    assert roles == ["user:Begin.", "assistant:yes", "user:Continue."]


def test_both_adapters_publish_the_shared_prompts() -> None:
    for adapter in (anthropic_adapter, openai_compat):
        assert adapter.START_PROMPT == _wire.START_PROMPT == "Begin."
        assert adapter.CONTINUE_PROMPT == _wire.CONTINUE_PROMPT == "Continue."


# --- the adapters agree --------------------------------------------------------------------


def _anthropic_user_texts(history: list[Message], agent: str) -> list[str]:
    messages = anthropic_adapter.map_history(history, agent)
    return [
        block["text"]
        for message in messages
        if message["role"] == "user"
        for block in message["content"]
        if block["type"] == "text"
    ]


def _openai_user_texts(history: list[Message], agent: str) -> list[str]:
    messages = openai_compat.map_history(history, agent=agent)
    return [m["content"] for m in messages if m["role"] == "user"]


def test_both_adapters_show_other_agents_and_rescued_results_alike() -> None:
    """Another agent's turn and its result, and the asker's rescued result, read the same."""
    history = [
        user("Plan a trip."),
        said("Scout", "Checking.", call("c1", "get_weather", city="Faro")),
        result("Scout", "c1", "Error: x", failed=True),
        said("Exec", "<tool_call>...</tool_call>", call("rescued-1", "get_weather", rescued=True)),
        result("Exec", "rescued-1", "sunny"),
    ]
    expected = [
        "Plan a trip.",
        '[Scout] Checking.\n[Scout] called `get_weather` with {"city": "Faro"}',
        "[Scout] `get_weather` failed:\nError: x",
        "Your call to `get_weather` returned:\nsunny",
    ]
    assert _anthropic_user_texts(history, "Exec") == expected
    # Chat templates want alternating roles, so neighbouring user texts are one message.
    assert _openai_user_texts(history, "Exec") == [
        "\n\n".join(expected[:3]),
        expected[3],
    ]


def test_both_adapters_tie_a_result_to_the_call_before_it_when_ids_repeat() -> None:
    """A server that leaves ids out gets `call_0` in every turn: each result still reads as
    the answer to the call it followed, not to a later call of another agent's that shares
    its id."""
    history = [
        user("Plan a trip."),
        said("Scout", "", call("call_0", "get_weather", city="Faro")),
        result("Scout", "call_0", "sunny"),
        said("Broker", "", call("call_0", "get_fares", city="Faro")),
        result("Broker", "call_0", "from 40 EUR"),
    ]
    expected = [
        "Plan a trip.",
        '[Scout] called `get_weather` with {"city": "Faro"}',
        "[Scout] `get_weather` returned:\nsunny",
        '[Broker] called `get_fares` with {"city": "Faro"}',
        "[Broker] `get_fares` returned:\nfrom 40 EUR",
    ]
    assert _anthropic_user_texts(history, "Exec") == expected
    assert _openai_user_texts(history, "Exec") == ["\n\n".join(expected)]


def _containers(value: Any) -> list[int]:
    """The ids of every dict and list in `value`, nested ones included."""
    if isinstance(value, dict):
        return [id(value), *(i for v in value.values() for i in _containers(v))]
    if isinstance(value, list):
        return [id(value), *(i for v in value for i in _containers(v))]
    return []


@pytest.mark.parametrize(
    "value",
    [
        {"city": "Lisbon", "days": [1, 2.5, None, True], "deep": {"a": [{"b": "é"}]}},
        [],
        {"when": datetime.date(2026, 12, 3), "pair": (1, [2])},
        "text",
    ],
    ids=["json", "empty", "other types", "scalar"],
)
def test_plain_copy_is_a_deep_copy(value: Any) -> None:
    """What `copy.deepcopy` gives, sharing no dict or list with the original (a request
    must not let whoever reads it change a record's arguments or a tool's schema)."""
    copied = _wire.plain_copy(value)
    assert copied == copy.deepcopy(value)
    assert not set(_containers(copied)) & set(_containers(value))
    if isinstance(value, dict) and "pair" in value:  # handed to deepcopy: a copy too
        assert copied["pair"][1] is not value["pair"][1]


def test_dumps_options_are_kept_apart() -> None:
    """Encoders are reused per option set: one call's options never leak into another's."""
    value = {"b": 1, "a": datetime.date(2026, 12, 3), "é": "ü"}
    assert _wire.dumps(value) == '{"b": 1, "a": "2026-12-03", "é": "ü"}'
    with pytest.raises(TypeError):
        _wire.dumps(value, sort_keys=True, default=None)
    assert _wire.dumps({"b": 1, "a": 2}, sort_keys=True, default=None) == '{"a": 2, "b": 1}'
    assert _wire.dumps(value) == '{"b": 1, "a": "2026-12-03", "é": "ü"}'
