"""`Experiment`: the runs of one experiment, as a frame, a summary per variant, scores, and
HTML."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from thena_nb.core.engine._aio import run_sync
from thena_nb.core.parts.changes import Changes
from thena_nb.core.records import _html
from thena_nb.core.runs.run import Run
from thena_nb.experiments._chart import score_chart
from thena_nb.experiments._rows import RunFacts, facts_of, row_of
from thena_nb.experiments._scorers import Scorer
from thena_nb.experiments._scoring import Scored, Scoring, explaining, named_scorers
from thena_nb.experiments._summary import (
    Sample,
    ScoreStats,
    compare_cells,
    compare_columns,
    frame_cells,
    frame_columns,
    kind_of,
    summarise,
)
from thena_nb.experiments.cases import Case

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

    from thena_nb.core.runs.diff import RunDiff

__all__ = ["Experiment"]


class Experiment:
    """The runs of one workflow over cases and variants, their scores, and their summary.

    `runs` lists the runs that ended, in (input, variant, repeat) order; a cancelled
    experiment keeps the runs that finished before it was cancelled (`cancelled` is then
    true). An experiment whose runs went to a store keeps only a summary of each (its row of
    `frame()` and its scores) and `runs` loads them from the store each time it is read;
    with `keep_runs=True`, or without a store, it keeps the runs themselves.

    Attributes:
        workflow_name: The workflow's name.
        inputs: The inputs, in order.
        cases: The cases, in order (a plain input is a `Case` without `expected`).
        variants: Variant name to its changes (`{"base": {}}` without variants).
        repeats: How many runs each (case, variant) has.
        scorers: The scorers by column name (empty when the runs were not scored).
        keep_runs: The runs themselves are kept (else `runs` loads them from the store).
        reused: How many runs were taken from the store instead of run again.
        slowdowns: How many times a rate limit made every run wait.
        cancelled: The experiment was cancelled before every run ended.
        wall_s: Seconds the whole experiment took.
    """

    def __init__(
        self,
        workflow_name: str,
        inputs: Sequence[str],
        variants: Mapping[str, Changes],
        *,
        cases: Sequence[Case] | None = None,
        repeats: int = 1,
        store: Any = None,
        keep_runs: bool = True,
        workflows: Mapping[str, Any] | None = None,
    ) -> None:
        self.workflow_name = workflow_name
        self.inputs = list(inputs)
        self.cases = list(cases) if cases is not None else [Case(i) for i in self.inputs]
        self.variants = dict(variants)
        self.repeats = repeats
        self.scorers: dict[str, Scorer] = {}
        self.reused = 0
        self._reused: set[int] = set()  # the slots whose run was taken from the store
        self.slowdowns = 0
        self.cancelled = False
        self.wall_s = 0.0
        self.keep_runs = keep_runs
        self._store = store  # where `runs` loads the runs from when they are not kept
        self._workflows = dict(workflows or {})  # variant name to its workflow
        size = len(self.inputs) * len(self.variants) * repeats
        self._slots: list[Run | None] = [None] * size  # the runs, when they are kept
        self._rows: list[tuple[Any, ...] | None] = [None] * size  # each ended run's summary
        self._run_ids: list[str | None] = [None] * size
        self._variant_names = list(self.variants)
        self._scores: list[Scored | None] = [None] * size

    @property
    def runs(self) -> list[Run]:
        """The runs that ended, in (input, variant, repeat) order: the kept runs, or else
        every run loaded from the store (each time it is read).

        Raises:
            ValueError: The runs were neither kept nor stored (`keep_runs=False` with
                `store=False`).
            StoreError: A run is no longer in the store.
        """
        return [self._run_at(slot) for slot in self._ended()]

    @property
    def run_ids(self) -> list[str]:
        """The ids of the runs that ended, in (input, variant, repeat) order (no loading)."""
        return [run_id for run_id in self._run_ids if run_id is not None]

    def _key(self, slot: int) -> tuple[str, str]:
        """The input and the variant of a slot (slots are in (input, variant, repeat) order)."""
        names = self._variant_names
        return self.inputs[self._place(slot)[0]], names[slot // self.repeats % len(names)]

    def _keep(self, slot: int, run: Run, *, reused: bool = False, changed: str = "") -> None:
        """Put a run that ended in its (input, variant, repeat) place: its summary, and the
        run itself when runs are kept. `changed` says why a run was not reused."""
        self._keep_facts(slot, facts_of(run), reused=reused, changed=changed)
        if self.keep_runs:
            self._slots[slot] = run

    def _keep_facts(
        self, slot: int, facts: RunFacts, *, reused: bool = False, changed: str = ""
    ) -> None:
        """Put a run's summary in its place, without the run (a stored run taken again:
        `runs` loads it when it is read)."""
        input, variant = self._key(slot)
        self._rows[slot] = tuple(row_of(input, variant, facts, reused, changed).values())
        self._run_ids[slot] = facts.run_id
        if reused:
            self._reused.add(slot)

    def _ended(self) -> list[int]:
        """The slots whose run ended, in order."""
        return [slot for slot, row in enumerate(self._rows) if row is not None]

    def _run_at(self, slot: int) -> Run:
        """The run of an ended slot: kept, or loaded from the store."""
        run = self._slots[slot]
        if run is not None:
            return run
        run_id = self._run_ids[slot]
        if self._store is None or run_id is None:
            raise ValueError(
                "this experiment kept only its runs' summaries and has no store to load "
                "them from; run it with `keep_runs=True` (or with a store) to keep them"
            )
        loaded: Run = self._store.load(run_id)
        if loaded.workflow is None:
            loaded.workflow = self._workflows.get(self._key(slot)[1])
        return loaded

    def _row(self, slot: int) -> dict[str, Any]:
        """An ended run's summary as a dict (the columns `row_of` gives)."""
        row = self._rows[slot]
        assert row is not None
        return dict(zip(_FRAME_DTYPES, row, strict=True))

    def _place(self, slot: int) -> tuple[int, int]:
        """The case index and the repeat of a slot."""
        return slot // (len(self.variants) * self.repeats), slot % self.repeats

    def frame(self) -> pd.DataFrame:
        """The runs as a DataFrame, one row per run, in (input, variant, repeat) order.

        Columns: `input`, `case` (the case's name, when a case has one), `variant`,
        `repeat` (0-based, with `repeats > 1`), `status`, `error` (the error of a failed
        run), `stop_reasons`, `turns`, `tool_calls`, `rescued`, `failures` (failed tool
        calls, plus one for a run that failed), `input_tokens`, `output_tokens`, `wall_s`,
        `cost_usd` (US dollars; missing when a turn's model had no price; `0` for a run
        taken from the store), `saved_usd` (what its replayed turns, or the whole run when
        it was taken from the store, cost when first run), `reused` (taken from the store),
        `changed` (empty for a reused run; else why it ran: the fingerprint's parts that
        changed since the stored run, e.g. `global PROMPTS['A']`, `helper (code)`, or
        `no stored run`, `stored run failed`, `reuse=False`, `no store`, `cannot be
        fingerprinted`); then, when the runs were
        scored, one column per scorer (boolean for pass/fail, float for numbers; missing
        where the scorer failed), `<name>_explanation` after a judge's column (and after
        any scorer that explained a run), and `scorer_error`.
        `stop_reasons` joins each loop's stop reason (pre-order) with commas; `rescued` is
        the share of the run's tool calls that were rescued from text (missing when it made
        none).
        """
        import pandas as pd

        dtypes = self._frame_dtypes()
        explained = explaining(self.scorers, self._scores)
        rows = [self._frame_row(slot, explained) for slot in self._ended()]
        frame = pd.DataFrame(rows, columns=list(dtypes))
        return frame.astype(dtypes)

    def _named_cases(self) -> bool:
        return any(case.name is not None for case in self.cases)

    def _frame_dtypes(self) -> dict[str, str]:
        dtypes: dict[str, str] = {}
        for column, dtype in _FRAME_DTYPES.items():
            dtypes[column] = dtype
            if column == "input" and self._named_cases():
                dtypes["case"] = "string"
            if column == "variant" and self.repeats > 1:
                dtypes["repeat"] = "int64"
        if self.scorers:
            names = list(self.scorers)
            kinds = {name: kind_of(name, self._scores) for name in names}
            dtypes.update(frame_columns(names, kinds, explaining(self.scorers, self._scores)))
        return dtypes

    def _frame_row(self, slot: int, explained: list[str]) -> dict[str, Any]:
        row = self._row(slot)
        case, repeat = self._place(slot)
        row["case"] = self.cases[case].name
        row["repeat"] = repeat
        if self.scorers:
            row.update(frame_cells(self._scores[slot], list(self.scorers), explained))
        return row

    def compare(self, *, confidence: float = 0.95, seed: int = 0) -> pd.DataFrame:
        """A summary per variant, one row each, in variant order.

        Columns: `runs`, `statuses` and `stop_reasons` (counts, e.g. `"until 2, exhausted
        1"`), `errors` (runs that failed), `mean_turns`, `mean_tool_calls`, `rescued`
        (share of all tool calls), `failures` (failed tool calls and failed runs),
        `input_tokens`, `output_tokens` (totals), `mean_wall_s`, `cost_usd` (total US
        dollars; missing when a run had no price) and `saved_usd` (what replayed turns and
        runs taken from the store saved). When the runs were scored, then for each scorer:
        its mean over the runs it scored (the pass rate of a pass/fail scorer) as `<name>`,
        the confidence
        interval as `<name>_ci_low` and `<name>_ci_high` (Wilson's for pass/fail, a
        bootstrap of the mean, seeded, for numbers), `<name>_pass@k` with `k = repeats`
        for a pass/fail scorer when `repeats > 1` (the share of cases where one of the `k`
        runs passed); and last `scorer_errors`, the runs where a scorer failed.

        Args:
            confidence: The intervals' confidence level.
            seed: The bootstrap's seed: the same seed gives the same intervals.
        """
        import pandas as pd

        stats = self._score_stats(confidence=confidence, seed=seed)
        dtypes = dict(_COMPARE_DTYPES)
        if self.scorers:
            dtypes.update(compare_columns(stats, self.repeats))
            dtypes["scorer_errors"] = "int64"
        rows = []
        for row in self._summary():
            if self.scorers:
                row.update(compare_cells(stats, row["variant"], self.repeats))
                row["scorer_errors"] = self._errors_of(row["variant"])
            rows.append(row)
        frame = pd.DataFrame(rows, columns=list(dtypes))
        return frame.astype(dtypes).set_index("variant")

    def _samples(self) -> list[Sample]:
        return [
            (self._key(slot)[1], self._place(slot)[0], scored)
            for slot, scored in enumerate(self._scores)
            if scored is not None
        ]

    def _score_stats(self, *, confidence: float = 0.95, seed: int = 0) -> list[ScoreStats]:
        return summarise(
            list(self.scorers), list(self.variants), self._samples(), repeats=self.repeats,
            confidence=confidence, seed=seed,
        )  # fmt: skip

    def _errors_of(self, variant: str) -> int:
        return sum(1 for v, _, scored in self._samples() if v == variant and scored.errors)

    def rescore(
        self, scorers: Sequence[Scorer] | Mapping[str, Scorer], *, concurrency: int = 8
    ) -> Experiment:
        """The same runs scored again with `scorers`: no workflow model is called.

        Only the scorers run (a judge calls its own model). The experiment keeps its own
        scores; to add a scorer to those, pass `[*exp.scorers.values(), new]`.

        Args:
            scorers: A list of scorers (each named by its `name` or `__name__`), or a dict
                of column name to scorer.
            concurrency: At most this many async scorers (judges) at a time.

        Returns:
            A new `Experiment` with the same runs and the new scores.

        Raises:
            TypeError, ValueError: Bad `scorers` (see `wf.map`).

        Example:
            >>> from thena_nb import Agent, Workflow
            >>> from thena_nb.models import ScriptedModel
            >>> from thena_nb.scorers import contains, max_turns
            >>> model = ScriptedModel(["Paris"])
            >>> wf = Workflow("w", [Agent("A", model=model)])
            >>> exp = wf.map(["France?", "Peru?"], scorers=[max_turns(1)], store=False,
            ...              progress=False)
            >>> again = exp.rescore({"paris": contains("Paris")})
            >>> again.frame()["paris"].tolist(), len(model.requests)
            ([True, True], 2)
        """
        named = named_scorers(scorers)
        again = Experiment(
            self.workflow_name, self.inputs, self.variants, cases=self.cases,
            repeats=self.repeats, store=self._store, keep_runs=self.keep_runs,
            workflows=self._workflows,
        )  # fmt: skip
        again._slots = list(self._slots)
        again._rows = list(self._rows)
        again._run_ids = list(self._run_ids)
        again._reused = set(self._reused)
        for name in ("reused", "slowdowns", "cancelled", "wall_s"):
            setattr(again, name, getattr(self, name))
        run_sync(again._score(named, concurrency=concurrency))
        return again

    async def _score(self, scorers: Mapping[str, Scorer], *, concurrency: int = 8) -> None:
        """Score every run that ended with `scorers`, one run at a time (loaded from the
        store when it was not kept); errors stay in their rows."""
        scoring = self._start_scoring(scorers, concurrency=concurrency)
        for slot in self._ended():
            self._score_one(scoring, slot, self._run_at(slot))
        await scoring.wait()

    def _start_scoring(self, scorers: Mapping[str, Scorer], *, concurrency: int) -> Scoring:
        """Set the scorers (no run scored yet): runs are then scored by `_score_one`."""
        self.scorers = dict(scorers)
        self._scores = [None] * len(self._slots)
        return Scoring(scorers, concurrency=concurrency)

    def _score_one(self, scoring: Scoring, slot: int, run: Run) -> None:
        self._scores[slot] = scoring.add(run, self.cases[self._place(slot)[0]])

    def score_chart(self, *, confidence: float = 0.95, seed: int = 0) -> Figure:
        """The scores as a matplotlib `Figure`: one panel per scorer, a bar per variant with
        its confidence interval (and pass@k as a diamond when `repeats > 1`).

        Args:
            confidence: The intervals' confidence level.
            seed: The bootstrap's seed.

        Returns:
            A `Figure` built without pyplot; it shows itself in Jupyter.

        Example:
            >>> from thena_nb import Agent, Workflow
            >>> from thena_nb.models import ScriptedModel
            >>> from thena_nb.scorers import contains, max_turns
            >>> wf = Workflow("w", [Agent("A", model=ScriptedModel(["Paris"]))])
            >>> exp = wf.map(["France?"], variants={"a": {}, "b": {}}, repeats=2,
            ...              scorers=[contains("Paris"), max_turns(1)], store=False, progress=False)
            >>> exp.score_chart()
            <ScoreChart size 420x325 with 2 Axes>
        """
        stats = self._score_stats(confidence=confidence, seed=seed)
        return score_chart(stats, list(self.variants), self.repeats)

    def _summary(self) -> list[dict[str, Any]]:
        by_variant: dict[str, list[dict[str, Any]]] = {v: [] for v in self.variants}
        for slot in self._ended():
            by_variant[self._key(slot)[1]].append(self._row(slot))
        return [_variant_row(v, rows) for v, rows in by_variant.items()]

    def _repr_html_(self) -> str:
        esc = _html.escape
        head = (
            f"experiment <b>{esc(self.workflow_name)}</b> · {len(self._ended())}/"
            f"{len(self._slots)} runs · {len(self.inputs)} inputs · "
            f"{len(self.variants)} variants · {self.wall_s:.2f} s"
        )
        if self.reused:
            head += f" · {self.reused} reused from the store"
        saved = sum(row["saved_usd"] for row in self._summary())
        if saved:
            head += f" · ${saved:.4g} saved"
        if self.slowdowns:
            head += f" · {self.slowdowns} rate-limit slowdowns"
        if self.cancelled:
            head += " · <b>cancelled</b>"
        if self.repeats > 1:
            head += f" · {self.repeats} repeats"
        stats = self._score_stats()
        columns = ("variant", *_COMPARE_COLUMNS, *self.scorers)
        cells = "".join(f"<th>{esc(c)}</th>" for c in columns)
        body = []
        for row in self._summary():
            row.update({s.scorer: _interval(s) for s in stats if s.variant == row["variant"]})
            tds = "".join(f"<td style='text-align:left'>{esc(_cell(row[c]))}</td>" for c in columns)
            body.append(f"<tr>{tds}</tr>")
        return (
            f'<div class="thena-experiment"><div>{head}</div>'
            f"<table><thead><tr>{cells}</tr></thead><tbody>{''.join(body)}</tbody></table></div>"
        )

    def __repr__(self) -> str:
        extra = ", cancelled" if self.cancelled else ""
        return (
            f"Experiment({self.workflow_name!r}, runs={len(self._ended())}/{len(self._slots)}, "
            f"inputs={len(self.inputs)}, variants={list(self.variants)!r}{extra})"
        )

    def diff(
        self,
        variant_a: str,
        variant_b: str,
        *,
        input: str | None = None,
        repeat: int | None = None,
    ) -> RunDiff:
        """The diff of two variants' runs of one input: `run_a.diff(run_b)` (no model call).

        Args:
            variant_a: The variant whose run is run `a`.
            variant_b: The variant whose run is run `b`.
            input: The input of both runs; it may be left out when there is only one.
            repeat: Which repeat of each variant to diff (0-based), needed when the
                experiment has `repeats > 1`.

        Returns:
            A `RunDiff`: the turns aligned, and the first divergence with its cause.

        Raises:
            ValueError: A variant or the input is not in the experiment, `input` is left out
                with several inputs, `repeat` is left out with `repeats > 1` or is out of
                range, or one of the two runs did not end (a cancelled experiment).

        Example:
            >>> from thena_nb import Agent, Workflow
            >>> from thena_nb.models import ScriptedModel
            >>> wf = Workflow("hello", [Agent("Greeter", model=ScriptedModel(["Hello!"]))])
            >>> variants = {"plain": {}, "brief": {"Greeter": {"system": "Be brief."}}}
            >>> exp = wf.map(["hi"], variants=variants, store=False, progress=False)
            >>> exp.diff("plain", "brief").first_divergence.changed
            ('system',)
            >>> again = wf.map(["hi"], variants=variants, repeats=3, store=False, progress=False)
            >>> again.diff("plain", "brief", repeat=2).first_divergence.changed
            ('system',)
        """
        for name in (variant_a, variant_b):
            if name not in self.variants:
                known = ", ".join(map(repr, self.variants))
                raise ValueError(f"the experiment has no variant {name!r}; variants: {known}")
        input = self._input_to_diff(input)
        repeat = self._repeat_to_diff(repeat)
        slots = {
            self._key(slot)[1]: slot
            for slot in self._ended()
            if self._key(slot)[0] == input and self._place(slot)[1] == repeat
        }
        for name in (variant_a, variant_b):
            if name not in slots:
                which = f" (repeat {repeat})" if self.repeats > 1 else ""
                raise ValueError(f"the run of {input!r} under {name!r}{which} did not end")
        return self._run_at(slots[variant_a]).diff(self._run_at(slots[variant_b]))

    def _input_to_diff(self, input: str | None) -> str:
        """The input `diff` compares the runs of: `input`, or the only one."""
        if input is None:
            if len(self.inputs) != 1:
                raise ValueError(
                    f"the experiment has {len(self.inputs)} inputs; say which with `input=`"
                )
            return self.inputs[0]
        if input not in self.inputs:
            raise ValueError(f"the experiment has no input {input!r}")
        return input

    def _repeat_to_diff(self, repeat: int | None) -> int:
        """The repeat `diff` compares: `repeat`, or 0 when each run has no repeats."""
        n = self.repeats
        valid = ", ".join(map(str, range(n))) if n <= 10 else f"0 to {n - 1}"
        if repeat is None:
            if self.repeats == 1:
                return 0
            raise ValueError(
                f"the experiment has {self.repeats} repeats of each run (`repeats="
                f"{self.repeats}`); say which to diff with `repeat=k`, 0-based: {valid}"
            )
        if (
            isinstance(repeat, bool)
            or not isinstance(repeat, int)
            or not 0 <= repeat < self.repeats
        ):
            raise ValueError(
                f"the experiment has no repeat {repeat!r}; `repeat=` is 0-based: {valid}"
            )
        return repeat


_FRAME_DTYPES: dict[str, str] = {
    "input": "string",
    "variant": "string",
    "status": "string",
    "error": "string",
    "stop_reasons": "string",
    "turns": "int64",
    "tool_calls": "int64",
    "rescued": "float64",
    "failures": "int64",
    "input_tokens": "int64",
    "output_tokens": "int64",
    "wall_s": "float64",
    "cost_usd": "float64",
    "saved_usd": "float64",
    "reused": "boolean",
    "changed": "string",
}

_COMPARE_DTYPES: dict[str, str] = {
    "variant": "string",
    "runs": "int64",
    "statuses": "string",
    "stop_reasons": "string",
    "errors": "int64",
    "mean_turns": "float64",
    "mean_tool_calls": "float64",
    "rescued": "float64",
    "failures": "int64",
    "input_tokens": "int64",
    "output_tokens": "int64",
    "mean_wall_s": "float64",
    "cost_usd": "float64",
    "saved_usd": "float64",
}

_COMPARE_COLUMNS = (
    "runs",
    "statuses",
    "stop_reasons",
    "errors",
    "mean_turns",
    "mean_tool_calls",
    "rescued",
    "failures",
    "input_tokens",
    "output_tokens",
    "mean_wall_s",
    "cost_usd",
    "saved_usd",
)


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
        "errors": sum(r["status"] == "failed" for r in rows),
        "mean_turns": sum(r["turns"] for r in rows) / n if n else None,
        "mean_tool_calls": calls / n if n else None,
        "rescued": rescued / calls if calls else None,
        "failures": sum(r["failures"] for r in rows),
        "input_tokens": sum(r["input_tokens"] for r in rows),
        "output_tokens": sum(r["output_tokens"] for r in rows),
        "mean_wall_s": sum(walls) / len(walls) if walls else None,
        "cost_usd": _total_cost(r["cost_usd"] for r in rows),
        "saved_usd": sum(r["saved_usd"] for r in rows),
    }


def _total_cost(costs: Iterable[float | None]) -> float | None:
    """The variant's runs' cost; `None` when a run had no price (the sum would fall short)."""
    total = 0.0
    for cost in costs:
        if cost is None:
            return None
        total += cost
    return total


def _counts(values: Iterable[str]) -> str:
    return ", ".join(f"{k} {n}" for k, n in Counter(values).most_common())


def _interval(stats: ScoreStats) -> str | None:
    """A scorer's mean and interval as text: `0.8 [0.49, 0.94]`."""
    if stats.mean is None:
        return None
    return f"{stats.mean:.3g} [{stats.low:.2g}, {stats.high:.2g}]"


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)
