"""Reuse is safe: a stored run is taken again only while nothing it depends on changed,
the code of steps, tools, stop conditions and model functions included (no stale reuse)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import warnings
from pathlib import Path
from typing import Any

import pytest

from thena_nb import Agent, Workflow, loop, tool, until_answered
from thena_nb.core.store.sqlite import SqliteRunStore
from thena_nb.experiments._plan import fingerprint
from thena_nb.models import FunctionModel, ScriptedModel, reply


def answering(fn: Any, *, until: Any = until_answered, tools: list[Any] | None = None) -> Workflow:
    agent = Agent("A", model=FunctionModel(fn), tools=tools or [])
    return Workflow("w", [loop(steps=[agent], until=until, max_iterations=3)])


def test_the_same_definition_built_twice_has_the_same_fingerprint() -> None:
    first = answering(lambda request: reply.text("one"))
    second = answering(lambda request: reply.text("one"))
    assert fingerprint(first) == fingerprint(second) is not None


def test_editing_a_lambda_stop_condition_changes_the_fingerprint() -> None:
    model = FunctionModel(lambda request: reply.text("one"))
    a = Workflow("w", [loop(steps=[Agent("A", model=model)], until=lambda ctx: True)])
    b = Workflow("w", [loop(steps=[Agent("A", model=model)], until=lambda ctx: False)])
    assert fingerprint(a) != fingerprint(b)


def test_editing_a_model_function_changes_the_fingerprint() -> None:
    assert fingerprint(answering(lambda r: reply.text("one"))) != fingerprint(
        answering(lambda r: reply.text("two"))
    )


def test_a_value_held_by_a_closure_counts() -> None:
    def build(word: str) -> Workflow:
        return answering(lambda request: reply.text(word))

    assert fingerprint(build("one")) == fingerprint(build("one"))
    assert fingerprint(build("one")) != fingerprint(build("two"))


def test_a_helper_the_code_calls_and_a_global_it_reads_count() -> None:
    source = textwrap.dedent(
        """
        LIMIT = {limit}
        def helper(text):
            return text.upper() + "{suffix}"
        def answer(request):
            return reply.text(helper("hi") * LIMIT)
        """
    )

    def build(limit: int, suffix: str) -> Workflow:
        scope: dict[str, Any] = {"reply": reply}
        exec(compile(source.format(limit=limit, suffix=suffix), "<cell>", "exec"), scope)
        return answering(scope["answer"])

    assert fingerprint(build(1, "!")) == fingerprint(build(1, "!"))
    assert fingerprint(build(1, "!")) != fingerprint(build(2, "!"))
    assert fingerprint(build(1, "!")) != fingerprint(build(1, "?"))


def test_a_tool_s_code_and_a_model_s_settings_count() -> None:
    def with_tool(offset: int) -> Workflow:
        @tool
        def add(a: int, b: int) -> int:
            """Add two numbers."""
            return a + b + offset

        return answering(lambda r: reply.text("x"), tools=[add])

    assert fingerprint(with_tool(0)) != fingerprint(with_tool(1))
    slow = Workflow("w", [Agent("A", model=ScriptedModel(["x"], delay=0.5))])
    fast = Workflow("w", [Agent("A", model=ScriptedModel(["x"]))])
    other = Workflow("w", [Agent("A", model=ScriptedModel(["y"]))])
    assert len({fingerprint(slow), fingerprint(fast), fingerprint(other)}) == 3


def test_a_run_does_not_change_the_fingerprint() -> None:
    wf = Workflow("w", [Agent("A", model=ScriptedModel(["x"]))])
    before = fingerprint(wf)
    wf.run("go", store=False)  # the offline model now holds a request
    assert fingerprint(wf) == before


def test_a_fingerprint_is_the_same_in_another_process(tmp_path: Path) -> None:
    script = tmp_path / "fp.py"
    script.write_text(
        textwrap.dedent(
            """
            from thena_nb import Agent, Workflow, loop, tool
            from thena_nb.experiments._plan import fingerprint
            from thena_nb.models import FunctionModel, reply

            @tool
            def pick(x: str) -> str:
                '''Pick.'''
                return "yes" if x in {"a", "b", "c", "d"} else "no"

            def answer(request):
                return reply.text("ok")

            agent = Agent("A", model=FunctionModel(answer), tools=[pick])
            wf = Workflow("w", [loop(steps=[agent], until=lambda ctx: ctx.iteration > 1)])
            print(fingerprint(wf))
            """
        )
    )
    outs = {
        subprocess.run(
            [sys.executable, str(script)],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": seed, "THENA_NB_STORE": "off", "PATH": ""},
        ).stdout.strip()
        for seed in ("1", "2")
    }
    assert len(outs) == 1 and len(next(iter(outs))) == 32


def test_editing_the_stop_condition_runs_the_experiment_again(tmp_path: Path) -> None:
    store = SqliteRunStore(tmp_path / "runs.db")

    def answer(request: Any) -> Any:
        return reply.text("answer")

    first = answering(answer, until=lambda ctx: True).map(["q1", "q2"], store=store)
    assert first.frame()["status"].tolist() == ["finished", "finished"] and first.reused == 0
    again = answering(answer, until=lambda ctx: True).map(["q1", "q2"], store=store)
    assert again.reused == 2  # unchanged: both runs reused
    assert [r.run_id for r in again.runs] == [r.run_id for r in first.runs]
    edited = answering(answer, until=lambda ctx: ctx.iteration >= 1).map(["q1", "q2"], store=store)
    assert edited.reused == 0  # edited: nothing stale was reused
    assert not {r.run_id for r in edited.runs} & {r.run_id for r in first.runs}


def test_editing_the_model_function_gives_the_new_answers(tmp_path: Path) -> None:
    store = SqliteRunStore(tmp_path / "runs.db")
    answering(lambda request: reply.text("old")).map(["q"], store=store)
    exp = answering(lambda request: reply.text("new")).map(["q"], store=store)
    assert exp.reused == 0 and [r.output for r in exp.runs] == ["new"]


def test_what_cannot_be_fingerprinted_is_never_reused_and_said_once(tmp_path: Path) -> None:
    store = SqliteRunStore(tmp_path / "runs.db")
    answers = iter(["a", "b", "c", "d"])  # state that a fingerprint cannot see

    def answer(request: Any) -> Any:
        return reply.text(next(answers))

    wf = answering(answer)
    with pytest.warns(UserWarning, match=r"cannot be fingerprinted .*list_iterator") as caught:
        exp = wf.map(["q1", "q2"], store=store)
    assert len([w for w in caught if "fingerprinted" in str(w.message)]) == 1
    assert sorted(r.output for r in exp.runs) == ["a", "b"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        again = wf.map(["q1", "q2"], store=store)
    assert sorted(r.output for r in again.runs) == ["c", "d"]


@pytest.mark.parametrize("keep_runs", [True, False])
def test_reused_runs_are_counted_as_they_are_found(
    keep_runs: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A progress bar over a re-run moves while stored runs load (runs kept) or are
    summarised (runs not kept: a batch at a time), not all at once at the end."""
    counted: list[int] = []
    seen_while_loading: list[int] = []

    class WatchedStore(SqliteRunStore):
        def load(self, run_id: str) -> Any:
            seen_while_loading.append(len(counted))
            return super().load(run_id)

        def summaries(self, run_ids: Any) -> Any:
            seen_while_loading.append(len(counted))
            return super().summaries(run_ids)

    store = WatchedStore(tmp_path / "runs.db")
    wf = Workflow("w", [Agent("A", model=ScriptedModel(["x"] * 200))])
    inputs = [f"q{i}" for i in range(150)]
    wf.map(inputs, store=store, progress=False)
    from thena_nb.experiments import _plan, _runner

    bar_updates: list[int] = []

    class Bar:
        def update(self, n: int = 1) -> None:
            bar_updates.append(n)
            counted.append(n)

        def close(self) -> None:
            pass

    monkeypatch.setattr(_runner, "_progress_bar", lambda total, enabled, name: Bar())
    monkeypatch.setattr(_plan, "_SUMMARY_BATCH", 64)
    again = wf.map(inputs, store=store, progress=True, keep_runs=keep_runs)
    assert again.reused == 150 and sum(bar_updates) == 150
    if keep_runs:
        assert len(seen_while_loading) == 150  # each run loaded
        assert seen_while_loading[0] == 0 and max(seen_while_loading) >= 64  # counted meanwhile
    else:
        assert seen_while_loading == [0, 64, 128]  # no run loaded: three batches summarised


def test_arrays_and_frames_count_by_contents_even_where_they_cannot_be_hashed() -> None:
    """Object arrays and frames with list cells (which pandas cannot hash) count too."""
    import numpy as np
    import pandas as pd

    def build(cell: list[int], item: object) -> Workflow:
        table = pd.DataFrame({"tags": [[1], cell]})
        objects = np.array([item, "x"], dtype=object)
        return answering(lambda request: reply.text(f"{table} {objects}"))

    assert fingerprint(build([2], 1)) == fingerprint(build([2], 1))
    assert fingerprint(build([2], 1)) != fingerprint(build([3], 1))
    assert fingerprint(build([2], 1)) != fingerprint(build([2], 2))


def test_library_parts_keep_the_fingerprints_they_had_before_the_core_split() -> None:
    """Stored experiments name the library's functions and classes by module; the core's split
    into packages moved those modules, and `former_name` keeps the names fingerprints had, so
    runs stored before the split are still reused. The digests were taken before the split."""
    from thena_nb import Decision, turn_of, was_exhausted
    from thena_nb.experiments._fingerprint import fingerprint_of

    agent = Agent("A", model=ScriptedModel(["ok"]), system="Be brief.")
    wf = Workflow("w", [loop(steps=[agent], until=until_answered, max_iterations=3)])
    values = [until_answered, was_exhausted, turn_of, wf, Decision.approve()]
    assert [fingerprint_of(v).digest() for v in values] == [
        "cd4e717e5225b6085601902caf427833",
        "2b8ee252ed5d0971b9b9cfeb0d25d03f",
        "374ba9ba9e9f98e1e7b98f46419de975",
        "510e13b544c5dfa92dff839dae1208a5",
        "db08ffce90cf71a80a738ba2b9fde7b7",
    ]
