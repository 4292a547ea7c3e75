"""Runs as records to read: a finished `Run` (its turns, report and requests), the diff of two
runs, and what-if analysis of stop conditions over a recorded run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from thena_nb.core.records._faces import lazy_face

if TYPE_CHECKING:
    from thena_nb.core.runs._current import current_run as current_run
    from thena_nb.core.runs._current import current_run_id as current_run_id
    from thena_nb.core.runs._view import RunView as RunView
    from thena_nb.core.runs.diff import Divergence as Divergence
    from thena_nb.core.runs.diff import DivergenceCause as DivergenceCause
    from thena_nb.core.runs.diff import PairDifference as PairDifference
    from thena_nb.core.runs.diff import RunDiff as RunDiff
    from thena_nb.core.runs.diff import TurnPair as TurnPair
    from thena_nb.core.runs.run import Run as Run
    from thena_nb.core.runs.run import last_run as last_run
    from thena_nb.core.runs.what_if import RecordedContext as RecordedContext
    from thena_nb.core.runs.what_if import WhatIf as WhatIf
    from thena_nb.core.runs.what_if import what_if as what_if

__all__ = [
    "Divergence",
    "DivergenceCause",
    "PairDifference",
    "RecordedContext",
    "Run",
    "RunDiff",
    "RunView",
    "TurnPair",
    "WhatIf",
    "current_run",
    "current_run_id",
    "last_run",
    "what_if",
]

_EXPORTS = {
    "RunView": "_view",
    "Divergence": "diff",
    "DivergenceCause": "diff",
    "PairDifference": "diff",
    "RecordedContext": "what_if",
    "Run": "run",
    "RunDiff": "diff",
    "TurnPair": "diff",
    "WhatIf": "what_if",
    "current_run": "_current",
    "current_run_id": "_current",
    "last_run": "run",
    "what_if": "what_if",
}

__getattr__, __dir__ = lazy_face(__name__, _EXPORTS)
