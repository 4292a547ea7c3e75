"""No stale reuse: each edit below, made between two runs of the same experiment, makes the
runs run again (each went unnoticed once, and the stale runs were reused silently)."""

from __future__ import annotations

import functools
import importlib
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from thena_nb import Agent, Workflow, loop, until_answered
from thena_nb.core.store.sqlite import SqliteRunStore
from thena_nb.experiments import run_experiment
from thena_nb.models import FunctionModel, reply


def workflow(fn: Any) -> Workflow:
    agent = Agent("A", model=FunctionModel(fn))
    return Workflow("w", [loop(steps=[agent], until=until_answered, max_iterations=2)])


def cell(source: str, **names: Any) -> dict[str, Any]:
    """Run `source` as a notebook cell would (its own module scope), and return the scope."""
    scope: dict[str, Any] = {"__name__": "cell", "reply": reply, "functools": functools, **names}
    exec(compile(textwrap.dedent(source), "<cell>", "exec"), scope)
    return scope


def reruns_after_edit(
    tmp_path: Path, before: Callable[[], Any], after: Callable[[], Any], *, changed: str
) -> None:
    """The same experiment is reused, then recomputed (with the new output) after the edit,
    and `frame()["changed"]` names what changed."""
    store = SqliteRunStore(tmp_path / "runs.db")
    first = run_experiment(workflow(before()), ["q"], store=store, progress=False)
    again = run_experiment(workflow(before()), ["q"], store=store, progress=False)
    assert (first.reused, again.reused) == (0, 1)
    old_output = first.runs[0].output
    edited = run_experiment(workflow(after()), ["q"], store=store, progress=False)
    assert edited.reused == 0, "the edit went unnoticed: a stale run was reused"
    assert edited.runs[0].output != old_output
    assert changed in edited.frame()["changed"][0]


STYLE = """
class Style:
    PREFIX = {prefix!r}
    def render(self, text):
        return self.PREFIX + text{tail}

def answer(request):
    return reply.text(Style().render("x"))
"""


def test_editing_a_class_attribute_the_model_function_uses(tmp_path: Path) -> None:
    def build(prefix: str) -> Any:
        return cell(STYLE.format(prefix=prefix, tail=""))["answer"]

    reruns_after_edit(tmp_path, lambda: build("a:"), lambda: build("b:"), changed="Style.PREFIX")


def test_editing_a_method_of_a_class_the_model_function_uses(tmp_path: Path) -> None:
    def build(tail: str) -> Any:
        return cell(STYLE.format(prefix="a:", tail=tail))["answer"]

    reruns_after_edit(
        tmp_path, lambda: build(""), lambda: build(".upper()"), changed="Style.render (code)"
    )


def test_editing_a_helper_behind_lru_cache(tmp_path: Path) -> None:
    source = """
    @functools.lru_cache(maxsize=None)
    def helper(text):
        return text + {suffix!r}

    def answer(request):
        return reply.text(helper("x"))
    """

    def build(suffix: str) -> Any:
        return cell(source.format(suffix=suffix))["answer"]

    reruns_after_edit(tmp_path, lambda: build("!"), lambda: build("?"), changed="helper (code)")


CALLABLE = """
class Answerer:
    def __init__(self, prompt):
        self._prompt = prompt
    def __call__(self, request):
        return reply.text(self._prompt{tail})
"""


def test_editing_a_callable_object_s_code(tmp_path: Path) -> None:
    def build(tail: str) -> Any:
        return cell(CALLABLE.format(tail=tail))["Answerer"]("hi")

    reruns_after_edit(
        tmp_path, lambda: build(""), lambda: build(".upper()"), changed="Answerer.__call__ (code)"
    )


def test_editing_a_private_instance_attribute(tmp_path: Path) -> None:
    answerer = cell(CALLABLE.format(tail=""))["Answerer"]
    reruns_after_edit(tmp_path, lambda: answerer("hi"), lambda: answerer("bye"), changed="._prompt")


def test_editing_a_helper_in_another_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`import helpers` then `helpers.shout(...)`: the module's helper is what the code runs."""
    module = tmp_path / "reuse_helpers_mod.py"
    module.write_text("def shout(text):\n    return text.upper()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    helpers = importlib.import_module("reuse_helpers_mod")
    monkeypatch.setitem(sys.modules, "reuse_helpers_mod", helpers)  # removed afterwards
    answer = cell("def answer(request):\n    return reply.text(helpers.shout('x'))\n",
                  helpers=helpers)["answer"]  # fmt: skip

    def edit() -> Any:
        module.write_text("def shout(text):\n    return text.upper() + '!!'\n")
        importlib.reload(helpers)
        return answer

    reruns_after_edit(tmp_path, lambda: answer, edit, changed="shout (code)")


def test_editing_the_contents_of_a_numpy_array(tmp_path: Path) -> None:
    weights = np.arange(5000.0)

    def answer(request: Any) -> Any:
        return reply.text(f"{weights.sum():.1f}")

    def edit() -> Any:
        weights[2500] = -1.0  # in the middle, where a repr shows "..."
        return answer

    reruns_after_edit(tmp_path, lambda: answer, edit, changed="closure weights")


def test_editing_a_cell_of_a_pandas_frame(tmp_path: Path) -> None:
    table = pd.DataFrame({"x": range(500), "y": ["a"] * 500})

    def answer(request: Any) -> Any:
        return reply.text(str(table["x"].sum()) + "".join(table["y"]))

    def edit() -> Any:
        table.loc[250, "x"] = -1
        return answer

    reruns_after_edit(tmp_path, lambda: answer, edit, changed="closure table")


def test_editing_a_library_closure_s_value(tmp_path: Path) -> None:
    """A library function's closure (a history processor's `n`) is configuration too."""
    from thena_nb import keep_first_and_recent

    def build(n: int) -> Workflow:
        agent = Agent("A", model=FunctionModel(lambda r: reply.text("ok")),
                      history=keep_first_and_recent(n))  # fmt: skip
        return Workflow("w", [agent])

    from thena_nb.experiments._plan import fingerprint

    assert fingerprint(build(3)) == fingerprint(build(3)) != fingerprint(build(4))


def test_a_private_lock_of_a_model_object_does_not_stop_reuse(tmp_path: Path) -> None:
    """Machinery without a stable description (a lock) in a private attribute of your own
    object is left out; its public configuration still counts."""
    import threading

    class Answerer:
        def __init__(self, word: str) -> None:
            self.word = word
            self._lock = threading.Lock()

        def __call__(self, request: Any) -> Any:
            with self._lock:
                return reply.text(self.word)

    reruns_after_edit(tmp_path, lambda: Answerer("one"), lambda: Answerer("two"), changed=".word")
