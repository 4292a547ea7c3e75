"""The views of a run diff: its frame (pandas) and its HTML, model text escaped."""

from __future__ import annotations

import pandas as pd

from thena_nb import Agent, Workflow, loop, tool, until_answered
from thena_nb.core.parts.changes import apply_changes
from thena_nb.models import ScriptedModel, reply
from thena_nb.notebook.frames import DIFF_COLUMNS

HOSTILE = "<script>alert('x')</script>"


@tool
def look(q: str) -> str:
    """Look something up."""
    return f"found {q}"


def lookup(
    replies: list[object], *, tools: list[object] | None = None, max_iterations: int = 10
) -> Workflow:
    agent = Agent("Finder", model=ScriptedModel(replies), tools=tools or [look])  # type: ignore[arg-type]
    steps = loop(steps=[agent], until=until_answered, max_iterations=max_iterations)
    return Workflow("find", [steps])


def test_frame_has_one_row_per_pair_with_the_columns_and_dtypes() -> None:
    run = lookup([reply.tool("look", q="a"), reply.tool("look", q="b"), "done"]).run(
        "go", store=False
    )
    fewer = apply_changes(
        lookup([reply.tool("look", q="a"), reply.tool("look", q="b"), "done"]),
        {"find/0.loop": {"max_iterations": 2}},
    )
    other = fewer.run("go", replay=run, store=False)
    frame = run.diff(other).frame()
    assert list(frame.columns) == list(DIFF_COLUMNS)
    assert {c: str(t) for c, t in frame.dtypes.items()} == DIFF_COLUMNS
    assert len(frame) == 3
    assert frame["turn_a"].tolist() == [0, 1, 2]
    assert frame["turn_b"].isna().tolist() == [False, False, True]
    assert frame["differs"].isna().tolist() == [True, True, False]
    assert frame.loc[2, "differs"] == "only_a"
    assert frame.loc[2, "cause"] == "stop" and frame["cause"].isna().sum() == 2
    assert frame["reply_differs"].isna().tolist() == [False, False, True]
    assert frame["replayed_b"].tolist()[:2] == [True, True]
    assert pd.isna(frame.loc[0, "response_a"])  # an empty text is missing, never ""
    assert frame.loc[2, "response_a"] == "done"
    assert frame["tool_calls_a"].tolist() == [1, 1, 0]


def test_frame_of_a_reply_divergence_flags_the_reply() -> None:
    run = lookup([reply.tool("look", q="a"), "done"]).run("go", store=False)
    other = lookup([reply.tool("look", q="z"), "done"]).run("go", store=False)
    frame = run.diff(other).frame()
    row = frame.iloc[0]
    assert (row["cause"], row["reply_differs"], row["request_differs"]) == ("reply", True, False)
    assert row["differs"] == "reply, tool_results"


def test_html_escapes_model_text_and_tool_results_and_marks_the_difference() -> None:
    @tool(name="look")
    def hostile(q: str) -> str:
        """Look something up."""
        return f"{HOSTILE} {q}"

    run = lookup([reply.tool("look", q="a"), f"It says {HOSTILE}"]).run("go", store=False)
    other = lookup([reply.tool("look", q="a"), f"It says {HOSTILE}"], tools=[hostile]).run(
        "go", store=False
    )
    page = run.diff(other)._repr_html_()
    assert "<script>" not in page
    assert "&lt;script&gt;" in page
    assert "tool_result" in page  # the cause's badge
    assert '<del style="background:#fdd;text-decoration:line-through">found</del>' in page
    assert "<ins" in page


def test_html_shows_at_most_twenty_pairs_after_the_divergence() -> None:
    replies: list[object] = [reply.tool("look", q=str(i)) for i in range(30)] + ["done"]
    run = lookup(replies, max_iterations=40).run("go", store=False)
    other = lookup([reply.tool("look", q="x"), *replies[1:]], max_iterations=40).run(
        "go", store=False
    )
    page = run.diff(other)._repr_html_()
    assert page.count("<tr><td style=") == 20
    assert "more turns not shown" in page
