"""Reasoning found by rescue: `split_reasoning`, and `RescueScan.reasoning` / `.text`.

Reasoning is split off before any call is looked for: it is reported apart from the answer
and never holds a call."""

from __future__ import annotations

import pytest

from thena_nb.core.records.model import ToolSpec
from thena_nb.core.rescue import RescueScan, scan_tool_calls, split_reasoning

SEARCH = ToolSpec(
    name="search",
    parameters={
        "type": "object",
        "properties": {"query": {"type": "string"}},
        "required": ["query"],
    },
)
CALL = '<tool_call>{"name": "search", "arguments": {"query": "rust"}}</tool_call>'


@pytest.mark.parametrize(
    ("text", "reasoning", "rest"),
    [
        ("<think>Look it up.</think>Here it is.", "Look it up.", "Here it is."),
        ("<thinking>\nLook it up.\n</thinking>\nHere it is.", "Look it up.", "Here it is."),
        ("[THINK]Look it up.[/THINK]Here it is.", "Look it up.", "Here it is."),
        ("<seed:think>Look it up.</seed:think>Here it is.", "Look it up.", "Here it is."),
        ("<|channel>thought\nLook it up.<channel|>Here it is.", "Look it up.", "Here it is."),
        ("<|channel>first thought<channel|>Here it is.", "first thought", "Here it is."),
        ("<|START_THINKING|>Look it up.<|END_THINKING|>Here it is.", "Look it up.", "Here it is."),
        ("<|inner_prefix|>Look it up.<|inner_suffix|>Here it is.", "Look it up.", "Here it is."),
        (
            "<|channel|>analysis<|message|>Look it up.<|end|>"
            "<|start|>assistant<|channel|>final<|message|>Here it is.<|return|>",
            "Look it up.",
            "Here it is.",
        ),
    ],
    ids=[
        "think",
        "thinking",
        "magistral",
        "seed",
        "gemma",
        "gemma-no-label",
        "cohere",
        "apertus",
        "harmony",
    ],
)
def test_each_reasoning_marker(text: str, reasoning: str, rest: str) -> None:
    """Every family's reasoning markers are split off, with the text that remains."""
    assert split_reasoning(text) == (reasoning, rest)


def test_no_reasoning_returns_the_text_itself() -> None:
    """Text without reasoning markers comes back unchanged, as the same object."""
    text = "Just an answer, with <b>markup</b> and {braces}."
    reasoning, rest = split_reasoning(text)
    assert reasoning is None
    assert rest is text


def test_several_blocks_are_joined_by_a_blank_line() -> None:
    text = "<think>First.</think>Partial answer. <think>Second.</think>Done."
    assert split_reasoning(text) == ("First.\n\nSecond.", "Partial answer. Done.")


def test_unclosed_and_close_only_blocks() -> None:
    """An open block runs to the end; a closing marker alone means the reply began in it."""
    assert split_reasoning("Answer first. <think>and then more thought") == (
        "and then more thought",
        "Answer first.",
    )
    assert split_reasoning("still thinking here</think>The answer.") == (
        "still thinking here",
        "The answer.",
    )


def test_harmony_text_is_the_final_channel_or_the_preamble() -> None:
    """A harmony output's text is its `final` channel; without one, its preambles."""
    with_final = (
        "<|channel|>analysis<|message|>Plan.<|end|>"
        "<|start|>assistant<|channel|>commentary<|message|>Checking.<|end|>"
        "<|start|>assistant<|channel|>final<|message|>It is sunny.<|return|>"
    )
    assert split_reasoning(with_final) == ("Plan.", "It is sunny.")
    preamble_only = (
        "<|channel|>commentary<|message|>Let me look that up.<|end|>"
        '<|start|>assistant<|channel|>commentary to=functions.search<|message|>{"query": "x"}'
        "<|call|>"
    )
    assert split_reasoning(preamble_only) == (None, "Let me look that up.")


def test_scan_reports_reasoning_with_and_without_calls() -> None:
    """`scan_tool_calls` fills `reasoning` and `text` whether or not a call is found, and
    also when no tool is named in the text."""
    with_call = scan_tool_calls(f"<think>Search for rust.</think>{CALL}", [SEARCH])
    assert [c.arguments for c in with_call.calls] == [{"query": "rust"}]
    assert (with_call.reasoning, with_call.text) == ("Search for rust.", CALL)
    no_call = scan_tool_calls("<think>Nothing to do.</think>Hello!", [SEARCH])
    assert (no_call.calls, no_call.reasoning, no_call.text) == ([], "Nothing to do.", "Hello!")
    plain = scan_tool_calls("Hello!", [SEARCH])
    assert (plain.reasoning, plain.text) == (None, None)


def test_no_tools_means_an_empty_scan() -> None:
    """With no tools the scan returns at once; the caller splits reasoning itself."""
    assert scan_tool_calls("<think>x</think>y", []) == RescueScan()


@pytest.mark.parametrize(
    "text",
    [
        f"<think>Maybe: {CALL}</think>No, I will just answer.",
        f"<seed:think>Draft {CALL}</seed:think>Done.",
        '<|channel>thought\n<|tool_call>call:search{query:<|"|>x<|"|>}<tool_call|><channel|>No.',
        '<|channel|>analysis<|message|>{"name": "search", "arguments": {"query": "x"}}<|end|>'
        "<|start|>assistant<|channel|>final<|message|>No call needed.",
        f"<|START_THINKING|>{CALL}<|END_THINKING|>Answer.",
        f"<|inner_prefix|>{CALL}",
    ],
)
def test_calls_are_never_taken_from_reasoning(text: str) -> None:
    assert scan_tool_calls(text, [SEARCH]).calls == []


def test_narration_inside_reasoning_does_not_hide_the_call() -> None:
    """Past-tense narration inside `<seed:think>` ("I have used 257 tokens") is reasoning,
    so it cannot make the call after it look like narration."""
    text = (
        "<seed:think>Call search.\n<seed:cot_budget_reflect>I have used 257 tokens, and there "
        "are 255 tokens remaining for use.</seed:cot_budget_reflect>\n</seed:think>\n"
        "<seed:tool_call>\n<function=search>\n<parameter=query>rust</parameter>\n</function>\n"
        "</seed:tool_call>"
    )
    assert [c.arguments for c in scan_tool_calls(text, [SEARCH]).calls] == [{"query": "rust"}]
