"""Scorers for experiments: `wf.map(cases, scorers=[...])` scores every run.

A scorer is any function `fn(run, case)` returning a `bool` (pass/fail), a number, or a
`Score` (a value and its explanation); async functions work too. The built-ins:

| scorer | passes when |
| --- | --- |
| `equals(expected=None)` | the output equals `expected` (by default the case's) |
| `contains(text=None)` | the output contains `text` (case-insensitive by default) |
| `matches(regex=None)` | `regex` matches somewhere in the output |
| `stop_reason(*reasons, loop=None)` | a loop stopped for one of `reasons` |
| `tool_trajectory(calls, mode=...)` | the tool calls follow `calls`: exact, in order, any order |
| `max_turns(n)` | the run took at most `n` turns |
| `no_failed_tools()` | no tool call failed |
| `judge(model, rubric)` | an LLM grades the run: a score and its explanation |

Example:
    >>> from thena_nb import Agent, Case, Workflow, loop, until_answered
    >>> from thena_nb.models import FunctionModel
    >>> from thena_nb.scorers import contains, max_turns
    >>> model = FunctionModel(lambda request: "Paris" if "France" in request.messages[0].content
    ...                       else "No idea.")
    >>> wf = Workflow("capitals", [loop(steps=[Agent("A", model=model)], until=until_answered)])
    >>> cases = [Case("Capital of France?", expected="Paris"), Case("Capital of Peru?",
    ...          expected="Lima")]
    >>> exp = wf.map(cases, scorers=[contains(), max_turns(2)], store=False, progress=False)
    >>> exp.frame()[["input", "contains", "max_turns"]]
                    input  contains  max_turns
    0  Capital of France?      True       True
    1    Capital of Peru?     False       True
    >>> exp.compare().loc["base", ["contains", "contains_ci_low", "contains_ci_high"]].round(3)
    contains            0.500
    contains_ci_low     0.095
    contains_ci_high    0.905
    Name: base, dtype: float64
"""

from thena_nb.experiments._judge import Judge, judge
from thena_nb.experiments._scorers import (
    Check,
    Score,
    Scorer,
    contains,
    equals,
    matches,
    max_turns,
    no_failed_tools,
    stop_reason,
    tool_trajectory,
)

__all__ = [
    "Check",
    "Judge",
    "Score",
    "Scorer",
    "contains",
    "equals",
    "judge",
    "matches",
    "max_turns",
    "no_failed_tools",
    "stop_reason",
    "tool_trajectory",
]
