"""Experiments: one workflow over many inputs and variants, summarised per variant.

`run_experiment(wf, inputs, variants=...)` runs every input under every variant (a variant is
a changes dict, see `grid`), at most `concurrency` runs at a time, on this machine
(`backend="local"`) or as Ray tasks (`backend="ray"`). Every run goes to a run store under an
id derived from the workflow, the input, the variant and the repeat, so running the same
experiment again reuses the runs that finished (no model call) and runs only the rest.
With `scorers=[...]` (see `thena_nb.scorers`) every run is scored; `repeats=n` runs each
(case, variant) `n` times, and `Experiment.compare()` gives each scorer's mean per variant
with a confidence interval.

Reuse. A stored run is taken again only while nothing it depends on changed. What it
depends on is the variant's *fingerprint*: named parts, one per prompt, setting, piece of
code (`answer (code)`), default argument (`answer default word`), closure variable
(`closure seen`), global the code reads (`global PROMPTS['A']`, `global helpers.shout`),
class attribute or method it uses (`Style.PREFIX`, `Style.render (code)`), item of a dict or
list and attribute of an object (private ones too, for your own classes), numpy array and
pandas frame (by contents). The rule that tells state from configuration:

- A part that changed *while an experiment ran* is **state** from then on: the runs
  themselves changed it (a counter of calls, a list of requests, a cache, a mutable
  default used as one). State never stops reuse. The store keeps which parts are state
  with the fingerprint, so a fresh process knows it too.
- Every other part is **configuration**: a prompt in a dict, a threshold in a list, a
  helper's code, a default argument, a `functools.partial`'s arguments. Changing it
  between experiments runs the runs again under new ids; changing it back reuses the
  earlier runs.
- State is told apart item by item: in `{"prompt": ..., "calls": 0}` only `calls` is state,
  and a key the runs add to a dict is state alone. A container of more than 64 items is
  one part.
- A value with no stable description (an object known only by its address, an iterator)
  is said once, and the variant's runs are then never reused.
- `approve=` (which decides the calls tool gates hold) counts too, by its code: runs made
  with another `approve`, or without one (left `waiting`), are not taken for its runs.

`exp.frame()` says per run whether it was `reused` and, if not, what `changed` since the
stored run (`global PROMPTS['A']`, `helper (code)`, `no stored run`, `stored run failed`,
...). `reuse=False` runs every run again and stores it in place of the old one.

Example:
    >>> from thena_nb import Agent, Workflow, grid, loop, until_answered
    >>> from thena_nb.models import ScriptedModel
    >>> agent = Agent("Executor", model=ScriptedModel(["done"]))
    >>> wf = Workflow("demo", [loop(steps=[agent], until=until_answered)])
    >>> exp = run_experiment(wf, ["a", "b"], variants=grid(
    ...     prompt={"brief": {"Executor": {"system": "Be brief."}}, "plain": {}}),
    ...     store=False, progress=False)
    >>> exp
    Experiment('demo', runs=4/4, inputs=2, variants=['prompt=brief', 'prompt=plain'])
    >>> [run.status for run in exp.runs]
    ['finished', 'finished', 'finished', 'finished']
"""

from thena_nb.core.parts.changes import Changes, grid
from thena_nb.experiments._plan import BASE_VARIANT
from thena_nb.experiments._result import Experiment
from thena_nb.experiments._runner import arun_experiment, run_experiment
from thena_nb.experiments._scorers import Score, Scorer
from thena_nb.experiments.cases import Case

__all__ = [
    "BASE_VARIANT",
    "Case",
    "Changes",
    "Experiment",
    "Score",
    "Scorer",
    "arun_experiment",
    "grid",
    "run_experiment",
]
