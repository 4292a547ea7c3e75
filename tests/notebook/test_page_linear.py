"""A run's page shows what each turn was sent by difference, so it grows with the run.

Each turn's request is the whole history before it; the page shows the messages shared with
the previous turn's request as one linked line and only the new ones in full, each distinct
system prompt and tool list once. These tests pin the size (bytes per turn, not time), that
every turn's new messages are there and escaped, that every link lands on the page, and
that a changed system prompt shows the change.
"""

from __future__ import annotations

import re
from typing import Any

from nb_records import HOSTILE

from thena_nb import (
    Agent,
    Context,
    Run,
    Workflow,
    keep_first_and_recent,
    loop,
    parallel,
    tool,
    until_answered,
)
from thena_nb.models import ScriptedModel, reply
from thena_nb.notebook.page import run_page_html

SYSTEM = "You add <numbers> & nothing else."


@tool
def add(a: int, b: int) -> str:
    """Add two <numbers>."""
    return f"{a + b} <b>sum-{a}</b>"


def tool_loop(n: int, **agent: Any) -> Workflow:
    """W1's shape: `n - 1` turns that call `add`, then an answer."""
    replies: list[Any] = [reply.tool("add", a=i, b=1) for i in range(n - 1)]
    replies.append("done")
    calc = Agent("Calc", model=ScriptedModel(replies), tools=[add], rescue=False, **agent)
    return Workflow("w", [loop(steps=[calc], until=until_answered, max_iterations=n)])


def views(page: str) -> list[str]:
    """Each turn's inspector, in order."""
    return page.split('<div class="thena-turn-view"')[1:]


def sent_count(view: str) -> int:
    found = re.search(r"<h4>Messages as sent \((\d+)\)</h4>", view)
    assert found is not None, view[:300]
    return int(found.group(1))


def test_bytes_per_turn_stay_flat_as_the_run_grows() -> None:
    """Ten times the turns is about ten times the page, not a hundred times."""
    sizes = {}
    for n in (100, 1000):
        run = tool_loop(n, system=SYSTEM).run("go", store=False)
        sizes[n] = len(run_page_html(run).encode()) / n
    assert sizes[1000] <= 1.2 * sizes[100], sizes
    assert sizes[1000] < 4096, sizes  # what a page that repeats each history holds in 3 turns


def test_every_turns_new_messages_are_shown_escaped_with_the_turn() -> None:
    n = 12
    run = tool_loop(n, system=SYSTEM).run(HOSTILE, store=False)
    page = run_page_html(run)
    assert "<script>alert" not in page and "<img src=x" not in page and "<b>sum-" not in page
    shown = views(page)
    assert len(shown) == n
    for i, view in enumerate(shown):
        assert sent_count(view) == len(run.request_of(i).messages)
        if i == 0:
            assert "&lt;script&gt;alert(1)&lt;/script&gt;" in view.split("Messages as sent")[1]
            continue
        # what turn i-1 added to the history: its call and the call's result, in full here
        result = f"{i} &lt;b&gt;sum-{i - 1}&lt;/b&gt;"
        request = view.split('class="thena-saw"')[1]
        assert result in request, i
        assert f"{{&quot;a&quot;: {i - 1}, &quot;b&quot;: 1}}" in request, i
        before = "message 0" if i == 1 else f"messages 0–{2 * i - 2}"
        assert f'<a href="#thena-h-0">{before}</a> as in ' in request, i
        assert f'<a href="#thena-req-{i - 1}">turn {i - 1}\'s request</a>' in request, i


def test_each_message_is_anchored_once_and_every_link_lands() -> None:
    run = tool_loop(30, system=SYSTEM).run("go", store=False)
    page = run_page_html(run)
    ids = re.findall(r'id="(thena-[^"]+)"', page)
    assert len(ids) == len(set(ids))
    sent = len(run.request_of(29).messages)
    assert {f"thena-h-{j}" for j in range(sent)} <= set(ids)
    links = set(re.findall(r'href="#(thena-[^"]+)"', page))
    assert links and links <= set(ids)


def test_the_system_prompt_and_tool_specs_are_shown_once() -> None:
    run = tool_loop(40, system=SYSTEM).run("go", store=False)
    page = re.sub(r'<details class="thena-wire">.*?</details>', "", run_page_html(run), flags=re.S)
    assert page.count("You add &lt;numbers&gt; &amp; nothing else.") == 1
    assert page.count("Add two &lt;numbers&gt;.") == 1
    later = views(page)[7]
    assert '<div class="thena-ref">as in <a href="#thena-p-' in later
    assert "<code>add</code>: as in <a href=" in later


def test_a_turn_whose_system_prompt_changed_shows_the_change() -> None:
    calc = Agent(
        "Calc",
        model=ScriptedModel([reply.tool("add", a=i, b=1) for i in range(4)] + ["done"]),
        tools=[add],
        system="Add <numbers> carefully.",
        rescue=False,
    )

    def hurry(ctx: Context) -> None:
        if ctx.iteration == 2:
            calc.system = "Add <numbers> quickly."

    wf = Workflow("w", [loop(steps=[calc, hurry], until=until_answered, max_iterations=9)])
    run = wf.run("go", store=False)
    assert run.request_of(1).system != run.request_of(2).system
    shown = views(run_page_html(run))
    assert "changed since" not in shown[1]
    changed = shown[2].split('class="thena-saw"')[1]
    assert "changed since turn 1" in changed
    assert '<del style="' in changed and ">carefully</del>" in changed
    assert '<ins style="' in changed and ">quickly</ins>" in changed
    assert "Add &lt;numbers&gt; quickly." in changed
    assert '<div class="thena-ref">as in <a href="#thena-p-' in shown[3]


def test_a_history_processor_and_a_parallel_block_count_what_was_sent() -> None:
    """Requests that are not one span of the history (a kept window; branches merged)."""
    windowed = tool_loop(25, history=keep_first_and_recent(4)).run("go", store=False)
    a = Agent("A", model=ScriptedModel(["a <i>1</i>"]))
    b = Agent("B", model=ScriptedModel(["b <i>2</i>"]))
    merged = Workflow("p", [parallel([a, b]), Agent("C", model=ScriptedModel(["c"]))]).run(
        "go", store=False
    )
    for run in (windowed, merged):
        page = run_page_html(run)
        assert "<i>1</i>" not in page and "<i>2</i>" not in page
        for i, view in enumerate(views(page)):
            assert sent_count(view) == len(run.request_of(i).messages), i
    last = views(run_page_html(merged))[2]
    assert "a &lt;i&gt;1&lt;/i&gt;" in last and "b &lt;i&gt;2&lt;/i&gt;" in last


def test_the_page_reads_without_script_and_from_a_loaded_run() -> None:
    run = tool_loop(5, system=SYSTEM).run("go", store=False)
    page = run_page_html(run)
    assert "<noscript><style>.thena-turn-view[hidden] { display: block; }" in page
    loaded = Run.from_json(run.to_json())
    again = run_page_html(loaded)
    assert [sent_count(v) for v in views(again)] == [sent_count(v) for v in views(page)]
    assert "wire payload of turn 0" in page
