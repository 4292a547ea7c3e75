"""Workflow definition errors are raised before anything runs."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from thena_nb import Agent, Workflow, WorkflowDefinitionError, loop, parallel, until_answered
from thena_nb.models import ScriptedModel


def agent(name: str = "A") -> Agent:
    return Agent(name, model=ScriptedModel(["x"]))


def test_empty_steps() -> None:
    with pytest.raises(WorkflowDefinitionError, match="workflow 'w': has no steps"):
        Workflow("w", [])


def test_empty_parallel_and_loop() -> None:
    with pytest.raises(
        WorkflowDefinitionError, match="parallel block 'w/0.parallel': has no steps"
    ):
        Workflow("w", [parallel([])])
    with pytest.raises(WorkflowDefinitionError, match="loop 'w/0.loop': has no steps"):
        Workflow("w", [loop(steps=[], until=until_answered)])


def test_a_non_step_is_named() -> None:
    with pytest.raises(WorkflowDefinitionError, match=r"'w/1': 42 is not a step"):
        Workflow("w", [agent(), 42])
    with pytest.raises(WorkflowDefinitionError, match="is not a step"):
        Workflow("w", [loop(steps=["Executor"], until=until_answered)])


def test_an_agent_without_a_model() -> None:
    with pytest.raises(WorkflowDefinitionError, match="agent 'w/0.A' has no model"):
        Workflow("w", [Agent("A", model=None)])  # type: ignore[arg-type]


def test_duplicate_agents_in_one_parallel_block() -> None:
    a = agent("Same")
    with pytest.raises(WorkflowDefinitionError, match="agent 'Same' appears twice"):
        Workflow("w", [parallel([a, agent("Same")])])


def test_state_must_be_a_pydantic_class() -> None:
    with pytest.raises(WorkflowDefinitionError, match="pydantic model class"):
        Workflow("w", [agent()], state=dict)  # type: ignore[arg-type]


def test_output_field_needs_state_and_an_existing_field() -> None:
    class S(BaseModel):
        summary: str = ""

    with pytest.raises(WorkflowDefinitionError, match="has no `state=`"):
        Workflow("w", [Agent("A", model=ScriptedModel([]), output_field="summary")])
    with pytest.raises(
        WorkflowDefinitionError, match="output_field='verdict'` is not a field of S"
    ):
        Workflow("w", [Agent("A", model=ScriptedModel([]), output_field="verdict")], state=S)


def test_until_with_too_many_parameters() -> None:
    def until(ctx: object, state: object, extra: object) -> bool:
        return True

    class S(BaseModel):
        pass

    with pytest.raises(WorkflowDefinitionError, match="must take `ctx` or `ctx, state`"):
        Workflow("w", [loop(steps=[agent()], until=until)], state=S)


def test_hooks_must_take_two_arguments() -> None:
    with pytest.raises(WorkflowDefinitionError, match="`on_fail` is called with two arguments"):
        Workflow("w", [loop(steps=[agent()], until=until_answered, on_fail=lambda ctx: None)])


def test_function_steps_take_ctx() -> None:
    with pytest.raises(WorkflowDefinitionError, match="must take one argument, `ctx`"):
        Workflow("w", [lambda: None])


def test_loop_argument_checks() -> None:
    with pytest.raises(ValueError, match="max_iterations"):
        loop(steps=[agent()], until=until_answered, max_iterations=0)
    with pytest.raises(ValueError, match="max_fails"):
        loop(steps=[agent()], until=until_answered, max_fails=0)
    with pytest.raises(TypeError, match="until"):
        loop(steps=[agent()], until="until_answered")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="list of steps"):
        parallel(agent())  # type: ignore[arg-type]


def test_bad_names() -> None:
    with pytest.raises(WorkflowDefinitionError):
        Workflow("a/b", [agent()])
    with pytest.raises(ValueError):
        Agent("", model=ScriptedModel([]))


def test_definition_errors_are_value_errors() -> None:
    with pytest.raises(ValueError):
        Workflow("w", [])


def test_calling_a_condition_with_nothing_says_to_pass_it_uncalled() -> None:
    from thena_nb import until_answered, was_exhausted

    with pytest.raises(TypeError, match=r"^`until_answered` is a condition: pass it without"):
        until_answered()
    with pytest.raises(TypeError, match=r"is a condition: pass it without calling it"):
        was_exhausted()


def test_an_async_stop_condition_or_hook_is_refused_at_definition() -> None:
    from thena_nb.core.parts.stopping import Condition

    async def ready(ctx: object) -> bool:
        return True

    async def hook(ctx: object, info: object) -> None:
        return None

    agent = Agent("A", model=ScriptedModel(["x"]))
    for until in (ready, Condition(ready), until_answered | ready):
        with pytest.raises(WorkflowDefinitionError, match=r"`until` \(ready\) is an `async def`"):
            Workflow("w", [loop(steps=[agent], until=until)])
    with pytest.raises(WorkflowDefinitionError, match=r"`on_fail` is an `async def`"):
        Workflow("w", [loop(steps=[agent], until=until_answered, on_fail=hook)])
