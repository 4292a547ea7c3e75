"""The magics, driven through a real in-process IPython shell."""

from __future__ import annotations

import asyncio
import importlib.util
import traceback
from collections.abc import Iterator
from typing import Any

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

from thena_nb import Budget, LoopStep, ParallelStep, Run, Workflow
from thena_nb.notebook.magics import parse_input

SETUP = """
from pydantic import BaseModel
from thena_nb import Agent
from thena_nb.models import ScriptedModel, reply

class ReviewState(BaseModel):
    notes: str = ""

model = ScriptedModel(["looks fine"])
Reviewer = Agent("Reviewer", model=model)
"""


@pytest.fixture
def ip() -> Iterator[InteractiveShell]:
    shell = InteractiveShell.instance()
    shell.reset(new_session=False)
    shell.run_line_magic("load_ext", "thena_nb")
    result = shell.run_cell(SETUP)
    assert result.success, result.error_in_exec
    yield shell
    shell.run_line_magic("unload_ext", "thena_nb")
    shell.reset(new_session=False)


def define(ip: InteractiveShell, line: str, body: str) -> Any:
    return ip.run_cell_magic("thena_workflow", line, body)


def html_outputs(cap: Any) -> list[str]:
    return [out.data["text/html"] for out in cap.outputs if "text/html" in out.data]


def test_load_ext_registers_the_magics_and_unload_removes_them(ip: InteractiveShell) -> None:
    magics = ip.magics_manager.magics
    assert "thena_workflow" in magics["cell"]
    assert {"thena_run", "thena_step"} <= set(magics["line"])
    ip.run_line_magic("unload_ext", "thena_nb")
    assert "thena_workflow" not in magics["cell"]
    assert "thena_run" not in magics["line"]
    ip.run_line_magic("load_ext", "thena_nb")
    assert "thena_workflow" in magics["cell"]


def test_the_cell_binds_a_workflow_of_its_expressions_and_shows_it(ip: InteractiveShell) -> None:
    body = (
        "import math\n"
        "Perf = Agent('Perf', model=ScriptedModel(['fast enough']))\n"
        "parallel([Reviewer, Perf])\n"
        "\n"
        "loop(steps=[Reviewer], until=until_answered, max_iterations=8, max_fails=math.inf)\n"
    )
    with capture_output() as cap:
        result = define(ip, "review --state ReviewState --budget-tokens 500", body)
    assert result is None
    wf = ip.user_ns["review"]
    assert isinstance(wf, Workflow)
    assert wf.name == "review"
    assert [type(s) for s in wf.steps] == [ParallelStep, LoopStep]
    assert wf.steps[1].max_iterations == 8
    assert wf.state is ip.user_ns["ReviewState"]
    assert wf.budget == Budget(max_tokens=500)
    (shown,) = html_outputs(cap)
    assert 'class="thena-workflow"' in shown and "max_iterations 8" in shown
    # Statements ran in the user namespace; thena_nb's names were only a fallback.
    assert ip.user_ns["Perf"].name == "Perf"
    assert "math" in ip.user_ns
    for name in ("parallel", "loop", "until_answered"):
        assert name not in ip.user_ns


def test_a_state_class_defined_in_the_cell_can_be_the_state(ip: InteractiveShell) -> None:
    body = (
        "class Tally(BaseModel):\n"
        "    seen: int = 0\n"
        "def count(ctx):\n"
        "    ctx.state.seen += 1\n"
        "loop(steps=[count], until=lambda ctx, state: state.seen >= 2)\n"
    )
    with capture_output():
        define(ip, "tally --state Tally", body)
    wf = ip.user_ns["tally"]
    assert wf.state is ip.user_ns["Tally"]
    run = wf.run("count")
    assert run.state.seen == 2
    assert run.loops[0].stop_reason == "until"


def test_the_notebook_package_exports_the_extension_hooks() -> None:
    import thena_nb.notebook as notebook

    assert notebook.__all__ == ["Stepper", "load_ipython_extension", "unload_ipython_extension"]
    shell = InteractiveShell.instance()
    notebook.load_ipython_extension(shell)
    assert "thena_workflow" in shell.magics_manager.magics["cell"]
    notebook.unload_ipython_extension(shell)
    assert "thena_workflow" not in shell.magics_manager.magics["cell"]


def test_budget_tool_calls_option(ip: InteractiveShell) -> None:
    with capture_output():
        define(ip, "wf --budget-tool-calls 3", "Reviewer")
    assert ip.user_ns["wf"].budget == Budget(max_tool_calls=3)
    assert ip.user_ns["wf"].state is None


def test_functions_defined_in_the_cell_see_thena_names_when_they_run(
    ip: InteractiveShell,
) -> None:
    body = (
        "def answered_politely(ctx):\n"
        "    return 'fine' in turn_of(ctx).response\n"
        "loop(steps=[Reviewer], until=answered_politely)\n"
    )
    with capture_output():
        define(ip, "polite", body)
    run = ip.user_ns["polite"].run("check")
    assert run.loops[0].stop_reason == "until"
    assert run.output == "looks fine"


def test_rerunning_the_cell_redefines_the_workflow_cleanly(ip: InteractiveShell) -> None:
    with capture_output():
        define(ip, "wf", "Reviewer")
        first = ip.user_ns["wf"]
        define(ip, "wf", "x = 1\nloop(steps=[Reviewer], until=until_answered)")
    second = ip.user_ns["wf"]
    assert second is not first
    assert [type(s) for s in second.steps] == [LoopStep]
    assert first.steps == [ip.user_ns["Reviewer"]]
    assert second.run("again").status == "finished"


WRONG_CELLS = [
    pytest.param(
        "Reviewer\nx = (\n",
        r"^line 3: syntax error \('\(' was never closed\): `x = \(`; fix the Python",
        id="syntax-error",
    ),
    pytest.param(
        "Reviewer\n\nloop(steps=[Reviewer], until=until_answerd)\n",
        r"^line 4: name 'until_answerd' is not defined \(did you mean `until_answered`\?\)$",
        id="unknown-name-thena",
    ),
    pytest.param(
        "Reviewr\n",
        r"^line 2: name 'Reviewr' is not defined \(did you mean `Reviewer`\?\)$",
        id="unknown-name-user",
    ),
    pytest.param(
        "Reviewer\nzzqqxx_nothing\n",
        r"^line 3: name 'zzqqxx_nothing' is not defined; define or import it above this line$",
        id="unknown-name-no-suggestion",
    ),
    pytest.param(
        "Reviewer\n'a note'\n",
        r"^line 3: `'a note'` is a `str` value, not a step; a step is an `Agent`",
        id="not-a-step",
    ),
    pytest.param(
        "ReviewState\n",
        r"^line 2: `ReviewState` is the class `ReviewState`, not a step",
        id="class-not-a-step",
    ),
    pytest.param(
        "@tool\ndef lookup(q: str) -> str:\n    '''Look up.'''\n    return q\nlookup\n",
        r"^line 6: `lookup` is a tool, not a step; give it to an agent",
        id="tool-not-a-step",
    ),
    pytest.param(
        "Reviewer\nloop(\n    steps=[Reviewer],\n    until=lambda ctx, state: True,\n)\n",
        r"^line 3: loop 'wf/1\.loop': `until` \(<lambda>\) takes a state parameter.*"
        r"add `--state YourState`",
        id="until-needs-state",
    ),
    pytest.param(
        "def step(ctx):\n    return missing_helper(ctx)\nstep(None)\n",
        r"^line 3: name 'missing_helper' is not defined",
        id="error-inside-a-cell-function",
    ),
    pytest.param(
        "Reviewer\nloop(steps=[Reviewer])\n",
        r"^line 3: TypeError: loop\(\) missing 1 required keyword-only argument: 'until'$",
        id="bad-call",
    ),
    pytest.param(
        "Reviewer\nreturn Reviewer\n",
        r"^line 3: syntax error \('return' outside function\)",
        id="return-outside-function",
    ),
    pytest.param("x = 1\n", r"^line 2: the cell has no steps", id="no-steps"),
]


@pytest.mark.parametrize(("body", "message"), WRONG_CELLS)
def test_a_wrong_cell_gets_one_line_naming_the_line(
    ip: InteractiveShell, body: str, message: str
) -> None:
    with pytest.raises(UsageError, match=message) as info:
        define(ip, "wf", body)
    assert "\n" not in str(info.value)
    assert "wf" not in ip.user_ns


def test_an_unknown_state_class_is_named_with_a_suggestion(ip: InteractiveShell) -> None:
    with pytest.raises(UsageError) as info:
        define(ip, "wf --state ReviewStat", "Reviewer")
    assert str(info.value) == (
        "line 1 (the `%%thena_workflow` line): `--state ReviewStat`: name 'ReviewStat' is not "
        "defined (did you mean `ReviewState`?)"
    )


def test_a_state_that_is_not_a_class_is_refused(ip: InteractiveShell) -> None:
    with pytest.raises(UsageError, match="`--state model` is a `ScriptedModel` value, not a"):
        define(ip, "wf --state model", "Reviewer")


def test_ipython_prints_the_usage_error_as_one_line_without_traceback(
    ip: InteractiveShell,
) -> None:
    with capture_output() as cap:
        result = ip.run_cell(
            "%%thena_workflow wf\nReviewer\nloop(steps=[Reviewer], until=until_answerd)"
        )
    assert isinstance(result.error_in_exec, UsageError)
    assert cap.stderr.strip() == (
        "UsageError: line 3: name 'until_answerd' is not defined (did you mean `until_answered`?)"
    )
    assert "Traceback" not in cap.stdout + cap.stderr


def test_thena_run_returns_the_run_which_the_cell_shows_and_underscore_holds(
    ip: InteractiveShell,
) -> None:
    with capture_output():
        define(ip, "review", "loop(steps=[Reviewer], until=until_answered)")
    with capture_output() as cap:
        result = ip.run_cell('%thena_run review "Check the {diff} please"', store_history=True)
    assert result.success, result.error_in_exec
    run = result.result
    assert isinstance(run, Run) and run.output == "looks fine"
    # The output history holds it, as `_` does (unless something put `_` in builtins).
    assert ip.user_ns["Out"][result.execution_count] is run
    request = ip.user_ns["model"].requests[-1]
    assert request.messages[0].content == "Check the {diff} please"
    assert "Run('review', status='finished'" in cap.stdout  # the cell's output
    shown = ip.display_formatter.format(run)[0]["text/html"]  # what a notebook renders
    assert 'class="thena-run"' in shown
    assert "looks fine" in shown


def test_run_equals_thena_run_binds_the_run_for_the_next_line(ip: InteractiveShell) -> None:
    with capture_output():
        define(ip, "review", "Reviewer")
        bound = ip.run_cell('run = %thena_run review "go"')
        framed = ip.run_cell("run.frame()")
    assert bound.success and framed.success, (bound.error_in_exec, framed.error_in_exec)
    assert isinstance(ip.user_ns["run"], Run)
    assert list(framed.result["agent"]) == ["Reviewer"]


def test_thena_run_works_inside_a_running_event_loop(ip: InteractiveShell) -> None:
    """Jupyter runs cells while its event loop is running; the magic must cope."""
    with capture_output():
        define(ip, "review", "Reviewer")

    async def cell() -> Any:
        return ip.run_line_magic("thena_run", "review inside")

    run = asyncio.run(cell())
    assert run.output == "looks fine"
    assert ip.user_ns["model"].requests[-1].messages[0].content == "inside"


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("print", r"^line 1 \(the `%%thena_workflow` line\): `print` is a Python builtin; "),
        ("model", r"^line 1 .*: `model` holds a `ScriptedModel` value; .*add `--force`$"),
    ],
)
def test_a_name_that_would_hide_a_builtin_or_an_object_is_refused(
    ip: InteractiveShell, line: str, message: str
) -> None:
    kept = ip.user_ns.get(line)
    with pytest.raises(UsageError, match=message):
        define(ip, line, "Reviewer")
    assert ip.user_ns.get(line) is kept


def test_force_binds_a_name_that_hides_a_builtin(ip: InteractiveShell) -> None:
    with capture_output():
        define(ip, "print --force", "Reviewer")
    assert isinstance(ip.user_ns["print"], Workflow)
    del ip.user_ns["print"]


def test_redefining_a_workflow_needs_no_force(ip: InteractiveShell) -> None:
    with capture_output():
        define(ip, "wf", "Reviewer")
        define(ip, "wf", "Reviewer\nReviewer")
    assert len(ip.user_ns["wf"].steps) == 2


def test_an_unknown_keyword_gets_a_did_you_mean_and_the_valid_keywords(
    ip: InteractiveShell,
) -> None:
    with pytest.raises(UsageError) as info:
        define(ip, "wf", "loop(steps=[Reviewer], until=until_answered, max_iteration=3)")
    message = str(info.value)
    assert message.startswith(
        "line 2: `loop()` has no keyword `max_iteration` (did you mean `max_iterations`?); "
        "it takes `steps`, `until`"
    )
    assert "`max_fails`" in message and "\n" not in message


def test_an_unknown_keyword_to_a_class_names_the_class(ip: InteractiveShell) -> None:
    with pytest.raises(UsageError, match=r"^line 2: `Agent\(\)` has no keyword `tool` \(did "):
        define(ip, "wf", "Agent('X', model=model, tool=[])")


def test_a_called_stop_helper_gets_a_hint_to_pass_it_uncalled(ip: InteractiveShell) -> None:
    with pytest.raises(UsageError) as info:
        define(ip, "wf", "Reviewer\nloop(steps=[Reviewer], until=until_answered())")
    assert str(info.value) == (
        "line 3: TypeError: `until_answered` is a condition: pass it without calling it, e.g. "
        "`loop(steps=[...], until=until_answered)`"
    )


def test_a_traceback_from_a_cell_function_numbers_lines_as_the_editor_does(
    ip: InteractiveShell,
) -> None:
    body = "def shout(ctx):\n    raise ValueError('boom')\nshout\n"
    with capture_output():
        define(ip, "wf", body)
    with pytest.raises(ValueError, match="boom") as info:
        ip.user_ns["wf"].run("x", store=False)
    frames = [f for f in traceback.extract_tb(info.value.__traceback__) if f.name == "shout"]
    assert [(f.lineno, f.line) for f in frames] == [(3, "raise ValueError('boom')")]


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ('"two words"', "two words"),
        ("'single quoted'", "single quoted"),
        ("plain words here", "plain words here"),
        ("question", "What is 2 + 2?"),
        ("undefined_name", "undefined_name"),
    ],
)
def test_run_input_is_quoted_text_or_a_name(ip: InteractiveShell, line: str, expected: str) -> None:
    ip.user_ns["question"] = "What is 2 + 2?"
    with capture_output():
        define(ip, "review", "Reviewer")
        ip.run_line_magic("thena_run", f"review {line}")
    assert ip.user_ns["model"].requests[-1].messages[0].content == expected


def test_a_failed_run_is_displayed_then_raised(ip: InteractiveShell) -> None:
    ip.run_cell(
        "Broken = Agent('Broken', model=ScriptedModel([reply.error(RuntimeError('model down'))]))"
    )
    with capture_output():
        define(ip, "broken", "Reviewer\nBroken")
    with capture_output() as cap, pytest.raises(RuntimeError, match="model down") as info:
        ip.run_line_magic("thena_run", "broken go")
    partial = info.value.run  # type: ignore[attr-defined]
    assert partial.status == "failed"
    assert len(partial.turns) == 1
    (shown,) = html_outputs(cap)
    assert "failed" in shown and "looks fine" in shown


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("", r"^usage: %thena_run NAME INPUT"),
        ("review", r"^usage: %thena_run NAME INPUT"),
        ("reviw go", r"^'reviw' is not a workflow \(did you mean `review`\?\)"),
        ("model go", r"^'model' is not a workflow; define it with `%%thena_workflow model`"),
        ('review "unclosed', r"^INPUT '\"unclosed': No closing quotation; close the quote$"),
    ],
)
def test_thena_run_usage_errors(ip: InteractiveShell, line: str, message: str) -> None:
    with capture_output():
        define(ip, "review", "Reviewer")
    with pytest.raises(UsageError, match=message):
        ip.run_line_magic("thena_run", line)


def test_thena_step_opens_a_stepper_or_shows_the_run(ip: InteractiveShell) -> None:
    with capture_output():
        define(ip, "review", "Reviewer")
    with capture_output() as cap:
        result = ip.run_line_magic("thena_step", 'review "step me"')
    if importlib.util.find_spec("thena_nb.notebook.stepper") is not None:
        from thena_nb.notebook import Stepper

        assert isinstance(result, Stepper)
    else:
        assert result is None
        (shown,) = html_outputs(cap)
        assert 'class="thena-run"' in shown
        assert ip.user_ns["model"].requests[-1].messages[0].content == "step me"


def test_parse_input_without_a_shell() -> None:
    ns: dict[str, Any] = {"cfg": type("Cfg", (), {"prompt": "from attr"})()}
    assert parse_input("cfg.prompt", ns) == "from attr"
    assert parse_input('  "a  b"  ', ns) == "a  b"
    assert parse_input("a\\ b c", ns) == "a b c"
    with pytest.raises(UsageError, match="has no attribute"):
        parse_input("cfg.missing", ns)
