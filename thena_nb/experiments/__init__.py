"""Experiments: one workflow over many inputs and variants, summarised per variant.

`run_experiment(wf, inputs, variants=...)` runs every input under every variant (a variant is
a changes dict, see `grid`), at most `concurrency` runs at a time, on this machine
(`backend="local"`) or as Ray tasks (`backend="ray"`). Every run goes to a run store under an
id derived from the workflow, the input, the variant and the repeat, so running the same
experiment again reuses the runs that finished (no model call) and runs only the rest.
With `scorers=[...]` (see `thena_nb.scorers`) every run is scored; `repeats=n` runs each
(case, variant) `n` times, and `Experiment.compare()` gives each scorer's mean per variant
with a confidence interval.

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

from thena_nb.core.cases import Case
from thena_nb.core.changes import Changes, grid
from thena_nb.experiments._plan import BASE_VARIANT
from thena_nb.experiments._result import Experiment
from thena_nb.experiments._runner import arun_experiment, run_experiment
from thena_nb.experiments._scorers import Score, Scorer

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
