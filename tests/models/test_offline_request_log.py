"""Offline models keep the requests of their last runs, not of every run they served, and
a sync `FunctionModel` is called inline unless it says it blocks."""

from __future__ import annotations

import threading

from thena_nb import Agent, Workflow
from thena_nb.core.records.model import ModelRequest
from thena_nb.models import FunctionModel, ScriptedModel
from thena_nb.models._offline import KEPT_RUNS


def test_an_offline_model_keeps_the_requests_of_its_last_runs_only() -> None:
    model = ScriptedModel(["a", "b"])
    wf = Workflow("two", [Agent("A", model=model), Agent("B", model=model)])
    runs = [wf.run(f"input {i}", store=False) for i in range(KEPT_RUNS + 4)]
    assert len(model.requests) == 2 * KEPT_RUNS
    firsts = [r.messages[0].content for r in model.requests[::2]]
    assert firsts == [r.input for r in runs[4:]]  # the oldest runs' requests went


def test_clearing_the_requests_forgets_them_and_later_runs_are_kept_again() -> None:
    model = ScriptedModel(["a"])
    wf = Workflow("one", [Agent("A", model=model)])
    wf.run("x", store=False)
    model.requests.clear()
    assert model.requests == []
    wf.run("y", store=False)
    assert [r.messages[0].content for r in model.requests] == ["y"]


def test_a_sync_function_model_is_called_on_the_event_loop_thread() -> None:
    threads: list[int] = []

    def answer(request: ModelRequest) -> str:
        threads.append(threading.get_ident())
        return "ok"

    Workflow("inline", [Agent("A", model=FunctionModel(answer))]).run("go", store=False)
    blocking = FunctionModel(answer, blocking=True)
    Workflow("threaded", [Agent("A", model=blocking)]).run("go", store=False)
    assert threads[0] == threading.get_ident()  # wf.run's loop runs on the calling thread
    assert threads[1] != threading.get_ident()
    assert repr(blocking) == "FunctionModel(answer, blocking=True)"
