"""`reply.error(exc)` raises `exc` itself, the very object given (`except` clauses and
`pytest.raises` compare identity), and each raise starts from the exception as it was given:
the notes, traceback and chained exceptions of earlier runs and retries never pile up."""

from __future__ import annotations

import asyncio
import traceback

import pytest

from thena_nb import Agent, Workflow
from thena_nb.core.records.errors import TransientModelError
from thena_nb.core.records.model import ModelRequest
from thena_nb.core.records.types import RetryPolicy
from thena_nb.models import FunctionModel, ScriptedModel, reply

pytestmark = pytest.mark.anyio

FAST = RetryPolicy(max_retries=2, initial_delay=0.0, max_delay=0.0, jitter=False)


async def test_scripted_error_is_the_very_exception_given_in_every_run() -> None:
    boom = RuntimeError("model down")
    wf = Workflow("w", [Agent("A", model=ScriptedModel([reply.error(boom)]))])
    for _ in range(3):
        with pytest.raises(RuntimeError) as info:
            await wf.arun("go", store=False)
        assert info.value is boom
        assert boom.__notes__ == ["in turn 0 of agent 'A' at 'w/0.A'"]  # one run's note only
        assert boom.__cause__ is None and boom.__context__ is None
    frames = traceback.extract_tb(boom.__traceback__)
    assert sum(frame.name == "respond" for frame in frames) == 1  # this run's raise only


async def test_notes_the_user_gave_are_kept_and_nothing_is_added_to_them() -> None:
    boom = ValueError("bad request")
    boom.add_note("written by the test")
    model = FunctionModel(lambda request: reply.error(boom))
    wf = Workflow("w", [Agent("A", model=model)])
    for _ in range(2):
        with pytest.raises(ValueError) as info:
            await wf.arun("go", store=False)
        assert info.value is boom
        assert boom.__notes__ == ["written by the test", "in turn 0 of agent 'A' at 'w/0.A'"]


async def test_a_retried_scripted_error_is_raised_again_without_piling_notes() -> None:
    busy = TransientModelError("busy")
    model = ScriptedModel([reply.error(busy)] * 3)
    wf = Workflow("w", [Agent("A", model=model)], retry=FAST)
    for _ in range(2):
        with pytest.raises(TransientModelError) as info:
            await wf.arun("go", store=False)
        assert info.value is busy
        assert busy.__notes__ == ["gave up after 3 attempts", "in turn 0 of agent 'A' at 'w/0.A'"]


def test_scripted_model_answers_with_the_same_object_outside_a_run() -> None:
    boom = KeyError("k")
    model = ScriptedModel([reply.error(boom), reply.error(boom)])
    request = ModelRequest(agent="A")
    for _ in range(2):
        with pytest.raises(KeyError) as info:
            asyncio.run(model.respond(request))
        assert info.value is boom and not hasattr(boom, "__notes__")
