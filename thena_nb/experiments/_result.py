"""`Experiment`: the runs of one experiment, as a frame, a summary per variant, and HTML."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from thena_nb.core import _html
from thena_nb.core.changes import Changes
from thena_nb.core.run import Run

if TYPE_CHECKING:
    import pandas as pd

    from thena_nb.core.diff import RunDiff

__all__ = ["Experiment"]


class Experiment:
    """The runs of one workflow over inputs and variants, and their summary.

    `runs` lists the runs that ended, in (input, variant) order; a cancelled experiment keeps
    the runs that finished before it was cancelled (`cancelled` is then true).

    Attributes:
        workflow_name: The workflow's name.
        inputs: The inputs, in order.
        variants: Variant name to its changes (`{"base": {}}` without variants).
        reused: How many runs were taken from the store instead of run again.
        slowdowns: How many times a rate limit made every run wait.
        cancelled: The experiment was cancelled before every run ended.
        wall_s: Seconds the whole experiment took.
    """

    def __init__(
        self, workflow_name: str, inputs: Sequence[str], variants: Mapping[str, Changes]
    ) -> None:
        self.workflow_name = workflow_name
        self.inputs = list(inputs)
        self.variants = dict(variants)
        self.reused = 0
        self.slowdowns = 0
        self.cancelled = False
        self.wall_s = 0.0
        self._slots: list[Run | None] = [None] * (len(self.inputs) * len(self.variants))
        self._keys: list[tuple[str, str]] = [(i, v) for i in self.inputs for v in self.variants]

    @property
    def runs(self) -> list[Run]:
        """The runs that ended, in (input, variant) order."""
        return [run for run in self._slots if run is not None]

    def _keep(self, slot: int, run: Run) -> None:
        """Put a run that ended in its (input, variant) place."""
        self._slots[slot] = run

    def _entries(self) -> list[tuple[str, str, Run]]:
        return [
            (key[0], key[1], run)
            for key, run in zip(self._keys, self._slots, strict=True)
            if run is not None
        ]

    def frame(self) -> pd.DataFrame:
        """The runs as a DataFrame, one row per run, in (input, variant) order.

        Columns: `input`, `variant`, `status`, `stop_reasons`, `turns`, `tool_calls`,
        `rescued`, `failures`, `input_tokens`, `output_tokens`, `wall_s`. `stop_reasons`
        joins each loop's stop reason (pre-order) with commas; `rescued` is the share of the
        run's tool calls that were rescued from text (missing when it made none).
        """
        import pandas as pd

        rows = [_run_row(i, v, run) for i, v, run in self._entries()]
        frame = pd.DataFrame(rows, columns=list(_FRAME_DTYPES))
        return frame.astype(_FRAME_DTYPES)

    def compare(self) -> pd.DataFrame:
        """A summary per variant, one row each, in variant order.

        Columns: `runs`, `statuses` and `stop_reasons` (counts, e.g. `"until 2, exhausted
        1"`), `mean_turns`, `mean_tool_calls`, `rescued` (share of all tool calls),
        `failures` (failed tool calls), `input_tokens`, `output_tokens` (totals),
        `mean_wall_s`.
        """
        import pandas as pd

        rows = self._summary()
        frame = pd.DataFrame(rows, columns=["variant", *_COMPARE_COLUMNS])
        return frame.astype(_COMPARE_DTYPES).set_index("variant")

    def _summary(self) -> list[dict[str, Any]]:
        by_variant: dict[str, list[dict[str, Any]]] = {v: [] for v in self.variants}
        for i, v, run in self._entries():
            by_variant[v].append(_run_row(i, v, run))
        return [_variant_row(v, rows) for v, rows in by_variant.items()]

    def _repr_html_(self) -> str:
        esc = _html.escape
        head = (
            f"experiment <b>{esc(self.workflow_name)}</b> · {len(self.runs)}/"
            f"{len(self._slots)} runs · {len(self.inputs)} inputs · "
            f"{len(self.variants)} variants · {self.wall_s:.2f} s"
        )
        if self.reused:
            head += f" · {self.reused} reused from the store"
        if self.slowdowns:
            head += f" · {self.slowdowns} rate-limit slowdowns"
        if self.cancelled:
            head += " · <b>cancelled</b>"
        cells = "".join(f"<th>{esc(c)}</th>" for c in ("variant", *_COMPARE_COLUMNS))
        body = []
        for row in self._summary():
            tds = "".join(
                f"<td style='text-align:left'>{esc(_cell(row[c]))}</td>"
                for c in ("variant", *_COMPARE_COLUMNS)
            )
            body.append(f"<tr>{tds}</tr>")
        return (
            f'<div class="thena-experiment"><div>{head}</div>'
            f"<table><thead><tr>{cells}</tr></thead><tbody>{''.join(body)}</tbody></table></div>"
        )

    def __repr__(self) -> str:
        extra = ", cancelled" if self.cancelled else ""
        return (
            f"Experiment({self.workflow_name!r}, runs={len(self.runs)}/{len(self._slots)}, "
            f"inputs={len(self.inputs)}, variants={list(self.variants)!r}{extra})"
        )

    def diff(self, variant_a: str, variant_b: str, *, input: str | None = None) -> RunDiff:
        """The diff of two variants' runs of one input: `run_a.diff(run_b)` (no model call).

        Args:
            variant_a: The variant whose run is run `a`.
            variant_b: The variant whose run is run `b`.
            input: The input of both runs; it may be left out when there is only one.

        Returns:
            A `RunDiff`: the turns aligned, and the first divergence with its cause.

        Raises:
            ValueError: A variant or the input is not in the experiment, `input` is left out
                with several inputs, or one of the two runs did not end (a cancelled
                experiment).

        Example:
            >>> from thena_nb import Agent, Workflow
            >>> from thena_nb.models import ScriptedModel
            >>> wf = Workflow("hello", [Agent("Greeter", model=ScriptedModel(["Hello!"]))])
            >>> variants = {"plain": {}, "brief": {"Greeter": {"system": "Be brief."}}}
            >>> exp = wf.map(["hi"], variants=variants, store=False, progress=False)
            >>> exp.diff("plain", "brief").first_divergence.changed
            ('system',)
        """
        for name in (variant_a, variant_b):
            if name not in self.variants:
                known = ", ".join(map(repr, self.variants))
                raise ValueError(f"the experiment has no variant {name!r}; variants: {known}")
        if input is None:
            if len(self.inputs) != 1:
                raise ValueError(
                    f"the experiment has {len(self.inputs)} inputs; say which with `input=`"
                )
            input = self.inputs[0]
        elif input not in self.inputs:
            raise ValueError(f"the experiment has no input {input!r}")
        runs = {v: run for i, v, run in self._entries() if i == input}
        for name in (variant_a, variant_b):
            if name not in runs:
                raise ValueError(f"the run of {input!r} under {name!r} did not end")
        return runs[variant_a].diff(runs[variant_b])


_FRAME_DTYPES: dict[str, str] = {
    "input": "string",
    "variant": "string",
    "status": "string",
    "stop_reasons": "string",
    "turns": "int64",
    "tool_calls": "int64",
    "rescued": "float64",
    "failures": "int64",
    "input_tokens": "int64",
    "output_tokens": "int64",
    "wall_s": "float64",
}

_COMPARE_DTYPES: dict[str, str] = {
    "variant": "string",
    "runs": "int64",
    "statuses": "string",
    "stop_reasons": "string",
    "mean_turns": "float64",
    "mean_tool_calls": "float64",
    "rescued": "float64",
    "failures": "int64",
    "input_tokens": "int64",
    "output_tokens": "int64",
    "mean_wall_s": "float64",
}

_COMPARE_COLUMNS = (
    "runs",
    "statuses",
    "stop_reasons",
    "mean_turns",
    "mean_tool_calls",
    "rescued",
    "failures",
    "input_tokens",
    "output_tokens",
    "mean_wall_s",
)


def _run_row(input: str, variant: str, run: Run) -> dict[str, Any]:
    calls = [c for t in run.turns for c in t.tool_calls]
    reasons = [n.stop_reason for n in run.loops]
    wall = (run.finished_at - run.started_at).total_seconds() if run.finished_at else None
    return {
        "input": input,
        "variant": variant,
        "status": run.status,
        "stop_reasons": ",".join(r or "error" for r in reasons) if reasons else None,
        "turns": len(run.turns),
        "tool_calls": len(calls),
        "rescued": sum(c.source == "rescued" for c in calls) / len(calls) if calls else None,
        "failures": sum(c.ok is False for c in calls),
        "input_tokens": run.usage.input_tokens,
        "output_tokens": run.usage.output_tokens,
        "wall_s": wall,
    }


def _variant_row(variant: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(rows)
    calls = sum(r["tool_calls"] for r in rows)
    rescued = sum((r["rescued"] or 0.0) * r["tool_calls"] for r in rows)
    walls = [r["wall_s"] for r in rows if r["wall_s"] is not None]
    return {
        "variant": variant,
        "runs": n,
        "statuses": _counts(r["status"] for r in rows),
        "stop_reasons": _counts(r["stop_reasons"] for r in rows if r["stop_reasons"]),
        "mean_turns": sum(r["turns"] for r in rows) / n if n else None,
        "mean_tool_calls": calls / n if n else None,
        "rescued": rescued / calls if calls else None,
        "failures": sum(r["failures"] for r in rows),
        "input_tokens": sum(r["input_tokens"] for r in rows),
        "output_tokens": sum(r["output_tokens"] for r in rows),
        "mean_wall_s": sum(walls) / len(walls) if walls else None,
    }


def _counts(values: Iterable[str]) -> str:
    return ", ".join(f"{k} {n}" for k, n in Counter(values).most_common())


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)
