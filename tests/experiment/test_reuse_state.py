"""Reuse tells state from configuration: what the runs themselves change (a counter, a list
of calls, a cache) never stops reuse; what the user changes between experiments (a prompt
in a dict, a threshold in a list, a default argument, a partial's arguments) always does.
`exp.frame()` says, per run, whether it was reused and what changed since the stored run."""

from __future__ import annotations

import functools
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from thena_nb import Agent, Workflow, loop, until_answered
from thena_nb.core.store.memory import MemoryRunStore
from thena_nb.core.store.sqlite import SqliteRunStore
from thena_nb.experiments import Experiment, run_experiment
from thena_nb.models import FunctionModel, reply

INPUTS = ["q1", "q2"]


def workflow(fn: Any) -> Workflow:
    agent = Agent("A", model=FunctionModel(fn))
    return Workflow("w", [loop(steps=[agent], until=until_answered, max_iterations=2)])


def run(fn: Any, store: Any, **options: Any) -> Experiment:
    return run_experiment(workflow(fn), INPUTS, store=store, progress=False, **options)


@pytest.fixture
def store(tmp_path: Path) -> SqliteRunStore:
    return SqliteRunStore(tmp_path / "runs.db")


# -- state: what the runs change does not stop reuse -----------------------------------------


def test_a_closure_counter_of_calls_does_not_stop_reuse(store: SqliteRunStore) -> None:
    calls: Counter[str] = Counter()

    def answer(request: Any) -> Any:
        calls[request.agent] += 1
        return reply.text("ok")

    first = run(answer, store)
    assert calls["A"] == 2 and first.reused == 0
    again = run(answer, store)
    assert again.reused == 2 and calls["A"] == 2  # no model call paid again
    assert again.run_ids == first.run_ids
    frame = again.frame()
    assert frame["reused"].tolist() == [True, True]
    assert frame["changed"].tolist() == ["", ""]


CALLS: list[str] = []
CACHE: dict[str, str] = {}


def logging_answer(request: Any) -> Any:
    CALLS.append(request.messages[0].content)
    return reply.text("ok")


def caching_answer(request: Any) -> Any:
    key = request.messages[0].content
    CACHE.setdefault(key, key.upper())
    return reply.text(CACHE[key])


def test_a_global_list_of_calls_does_not_stop_reuse(store: SqliteRunStore) -> None:
    CALLS.clear()
    run(logging_answer, store)
    again = run(logging_answer, store)
    assert again.reused == 2 and len(CALLS) == 2


def test_a_global_cache_filled_by_the_runs_does_not_stop_reuse(store: SqliteRunStore) -> None:
    CACHE.clear()
    run(caching_answer, store)
    again = run(caching_answer, store)
    assert again.reused == 2 and again.frame()["reused"].all()
    # A new input fills the cache further: the stored runs are still reused.
    more = run_experiment(workflow(caching_answer), [*INPUTS, "q3"], store=store, progress=False)
    assert more.reused == 2 and more.frame()["changed"].tolist() == ["", "", "no stored run"]
    assert run_experiment(workflow(caching_answer), [*INPUTS, "q3"], store=store,
                          progress=False).reused == 3  # fmt: skip


def test_a_mutable_default_used_as_a_cache_does_not_stop_reuse(store: SqliteRunStore) -> None:
    def answer(request: Any, _seen: dict[str, int] = {}) -> Any:  # noqa: B006 - the point
        _seen[request.messages[0].content] = len(_seen)
        return reply.text("ok")

    run(answer, store)
    assert run(answer, store).reused == 2


def test_a_callable_model_object_counting_its_calls_does_not_stop_reuse(
    store: SqliteRunStore,
) -> None:
    class Answerer:
        def __init__(self) -> None:
            self.calls = 0
            self._last: str | None = None

        def __call__(self, request: Any) -> Any:
            self.calls += 1
            self._last = request.messages[0].content
            return reply.text("ok")

    answerer = Answerer()
    run(answerer, store)
    assert run(answerer, store).reused == 2 and answerer.calls == 2


def test_repeats_are_reused_while_a_counter_counts(store: SqliteRunStore) -> None:
    calls: Counter[str] = Counter()

    def answer(request: Any) -> Any:
        calls["n"] += 1
        return reply.text("ok")

    run(answer, store, repeats=3)
    again = run(answer, store, repeats=3)
    assert again.reused == 6 and calls["n"] == 6


def test_state_found_once_is_remembered_by_the_store(tmp_path: Path) -> None:
    """A fresh process (a new store object, a counter that starts elsewhere) still knows
    which values are state: the store keeps it with the fingerprint."""
    path = tmp_path / "runs.db"
    calls: Counter[str] = Counter()

    def answer(request: Any) -> Any:
        calls["n"] += 1
        return reply.text("ok")

    with SqliteRunStore.from_path(path) as first:
        run(answer, first)
    calls["n"] = 40  # as a counter stands in another process after other work
    with SqliteRunStore.from_path(path) as reopened:
        assert run(answer, reopened).reused == 2


def test_state_works_with_the_memory_store() -> None:
    store = MemoryRunStore()
    calls: list[int] = []

    def answer(request: Any) -> Any:
        calls.append(1)
        return reply.text("ok")

    run(answer, store)
    assert run(answer, store).reused == 2


# -- configuration: what the user changes is noticed ------------------------------------------


PROMPTS = {"A": "Be brief."}
LIMITS = [0.5]


def prompted(request: Any) -> Any:
    return reply.text(PROMPTS["A"])


def thresholded(request: Any) -> Any:
    return reply.text("yes" if LIMITS[0] > 0.3 else "no")


def test_a_prompt_in_a_global_dict_is_configuration(store: SqliteRunStore) -> None:
    PROMPTS["A"] = "Be brief."
    run(prompted, store)
    assert run(prompted, store).reused == 2
    PROMPTS["A"] = "Be long."
    edited = run(prompted, store)
    assert edited.reused == 0 and [r.output for r in edited.runs] == ["Be long.", "Be long."]
    frame = edited.frame()
    assert frame["reused"].tolist() == [False, False]
    assert all("global PROMPTS['A']" in changed for changed in frame["changed"])


def test_a_threshold_in_a_global_list_is_configuration(store: SqliteRunStore) -> None:
    LIMITS[0] = 0.5
    run(thresholded, store)
    LIMITS[0] = 0.1
    edited = run(thresholded, store)
    assert edited.reused == 0 and edited.runs[0].output == "no"
    assert "global LIMITS[0]" in edited.frame()["changed"][0]


def test_a_config_value_beside_a_counter_stays_configuration(store: SqliteRunStore) -> None:
    """One dict holds a prompt and a count of calls: the count is state, the prompt not."""
    settings: dict[str, Any] = {"prompt": "v1", "calls": 0}

    def answer(request: Any) -> Any:
        settings["calls"] += 1
        return reply.text(settings["prompt"])

    run(answer, store)
    assert run(answer, store).reused == 2
    settings["prompt"] = "v2"
    edited = run(answer, store)
    assert edited.reused == 0 and edited.runs[0].output == "v2"
    assert "closure settings['prompt']" in edited.frame()["changed"][0]


def test_a_default_argument_is_configuration(store: SqliteRunStore) -> None:
    def build(word: str) -> Any:
        def answer(request: Any, word: str = word) -> Any:
            return reply.text(word)

        return answer

    run(build("one"), store)
    assert run(build("one"), store).reused == 2
    edited = run(build("two"), store)
    assert edited.reused == 0 and "answer default word" in edited.frame()["changed"][0]


def _say(word: str, request: Any) -> Any:
    return reply.text(word)


def test_a_partial_s_arguments_are_configuration(store: SqliteRunStore) -> None:
    run(functools.partial(_say, "one"), store)
    assert run(functools.partial(_say, "one"), store).reused == 2
    edited = run(functools.partial(_say, "two"), store)
    assert edited.reused == 0 and edited.runs[0].output == "two"


def test_going_back_to_an_earlier_configuration_reuses_its_runs(store: SqliteRunStore) -> None:
    PROMPTS["A"] = "Be brief."
    first = run(prompted, store)
    PROMPTS["A"] = "Be long."
    run(prompted, store)
    PROMPTS["A"] = "Be brief."
    back = run(prompted, store)
    assert back.reused == 2 and back.run_ids == first.run_ids


# -- saying why ---------------------------------------------------------------------------------


def test_the_frame_says_why_a_run_ran(store: SqliteRunStore) -> None:
    first = run(lambda request: reply.text("ok"), store).frame()
    assert first["reused"].tolist() == [False, False]
    assert first["changed"].tolist() == ["no stored run", "no stored run"]
    assert str(first["reused"].dtype) == "boolean" and str(first["changed"].dtype) == "string"


def test_reuse_false_forces_a_fresh_run_that_later_runs_reuse(store: SqliteRunStore) -> None:
    calls: list[int] = []

    def answer(request: Any) -> Any:
        calls.append(1)
        return reply.text(f"call {len(calls)}")

    first = run(answer, store)
    fresh = run(answer, store, reuse=False)
    assert fresh.reused == 0 and len(calls) == 4
    assert fresh.frame()["changed"].tolist() == ["reuse=False", "reuse=False"]
    assert sorted(r.output for r in fresh.runs) == ["call 3", "call 4"]
    again = run(answer, store)  # the fresh runs replaced the old ones
    assert again.reused == 2 and sorted(r.output for r in again.runs) == ["call 3", "call 4"]
    assert again.run_ids == first.run_ids


def test_without_a_store_nothing_is_reused_and_the_frame_says_so() -> None:
    frame = run(lambda request: reply.text("ok"), False).frame()
    assert frame["reused"].tolist() == [False, False]
    assert frame["changed"].tolist() == ["no store", "no store"]


def test_a_key_the_runs_add_beside_a_prompt_leaves_the_prompt_configuration(
    store: SqliteRunStore,
) -> None:
    """Only what the runs added (`last`) is state, not the dict that holds the prompt."""
    settings: dict[str, Any] = {"prompt": "v1"}

    def answer(request: Any) -> Any:
        settings["last"] = request.messages[0].content
        return reply.text(settings["prompt"])

    run(answer, store)
    assert run(answer, store).reused == 2
    settings["prompt"] = "v2"
    assert run(answer, store).reused == 0


def test_editing_an_agent_s_prompt_names_it(store: SqliteRunStore) -> None:
    def build(system: str) -> Workflow:
        return Workflow("w", [Agent("A", model=FunctionModel(lambda r: "ok"), system=system)])

    run_experiment(build("one"), INPUTS, store=store, progress=False)
    edited = run_experiment(build("two"), INPUTS, store=store, progress=False)
    assert edited.frame()["changed"].tolist() == ["workflow.steps[0].system"] * 2


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_the_store_keeps_fingerprint_records_newest_first(kind: str, tmp_path: Path) -> None:
    store = MemoryRunStore() if kind == "memory" else SqliteRunStore(tmp_path / "runs.db")
    store.keep_fingerprint("w\x1fbase", {"format": 1, "digest": "a", "parts": {}, "state": []})
    store.keep_fingerprint("w\x1fbase", {"format": 1, "digest": "b", "parts": {}, "state": []})
    store.keep_fingerprint("w\x1fbase", {"format": 1, "digest": "a", "parts": {}, "state": ["x"]})
    kept = store.fingerprints("w\x1fbase")
    assert [(r["digest"], r["state"]) for r in kept] == [("a", ["x"]), ("b", [])]
    assert store.fingerprints("other") == []


def test_a_record_of_a_newer_format_is_passed_over(store: SqliteRunStore) -> None:
    """A record written by a newer version is not read as this version's: no reuse from it,
    and no error."""
    first = run(prompted, store)
    [record] = store.fingerprints("w\x1fbase")
    newer = {**record, "format": 99, "digest": "newer"}  # its parts are the same
    store.keep_fingerprint("w\x1fbase", newer)
    assert store.fingerprints("w\x1fbase")[0]["format"] == 99
    again = run(prompted, store)
    assert again.reused == 2 and again.run_ids == first.run_ids
