"""Reasoning a model writes in its text is kept apart from its answer (`Turn.reasoning`),
never searched for calls, and replayed as it was recorded."""

from __future__ import annotations

from helpers import calc

from thena_nb import Agent, Workflow, loop, until_answered
from thena_nb.models import Reply, ScriptedModel

HARMONY = (
    "<|channel|>analysis<|message|>I should add them.<|end|>"
    "<|start|>assistant<|channel|>commentary to=functions.add <|constrain|>json"
    '<|message|>{"a": 2, "b": 3}<|call|>'
)


def looped(replies: list[object]) -> Workflow:
    return Workflow("w", [loop(steps=[calc(replies)], until=until_answered)])


def test_think_blocks_become_reasoning_and_never_calls() -> None:
    text = '<think>maybe {"name": "add", "arguments": {"a": 9, "b": 9}}</think>The answer is 4.'
    run = looped([text]).run("go", store=False)
    (turn,) = run.turns
    assert turn.reasoning is not None and '"a": 9' in turn.reasoning
    assert turn.info.response == "The answer is 4." and not turn.info.called_tool
    assert run.output == "The answer is 4." and run.history[-1].content == "The answer is 4."


def test_a_harmony_call_runs_and_its_analysis_is_reasoning() -> None:
    run = looped([HARMONY, "5"]).run("go", store=False)
    first = run.turns[0]
    assert first.reasoning == "I should add them."
    assert [(c.name, c.arguments, c.source, c.result) for c in first.tool_calls] == [
        ("add", {"a": 2, "b": 3}, "rescued", "5")
    ]
    assert "analysis" not in first.info.response and "I should" not in first.info.response


def test_a_replay_reproduces_reasoning_and_rescued_calls_without_a_model_call() -> None:
    wf = looped([HARMONY, "<think>done thinking</think>5"])
    first = wf.run("go", store=False)
    model = wf.steps[0].steps[0].model
    model.requests.clear()
    again = wf.run("go", replay=first, store=False)
    assert model.requests == [] and again.replay_diverged_at is None
    strip = {"started_at", "duration_s", "replayed", "attempts", "cost_usd", "saved_usd"}
    assert [t.model_dump(exclude=strip) for t in again.turns] == [
        t.model_dump(exclude=strip) for t in first.turns
    ]
    assert again.history == first.history
    assert [t.reasoning for t in again.turns] == ["I should add them.", "done thinking"]


def test_reasoning_is_split_without_tools_and_an_adapters_own_reasoning_is_kept() -> None:
    plain = Agent("A", model=ScriptedModel(["<think>hmm</think>hello"]))
    turn = Workflow("w", [plain]).run("go", store=False).turns[0]
    assert (turn.reasoning, turn.info.response) == ("hmm", "hello")
    given = Agent("B", model=ScriptedModel([Reply(text="the answer", reasoning="thought")]))
    kept = Workflow("w", [given]).run("go", store=False).turns[0]
    assert (kept.reasoning, kept.info.response) == ("thought", "the answer")
