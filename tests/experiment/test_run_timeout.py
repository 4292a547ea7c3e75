"""`wf.map(..., run_timeout=seconds)`: a run still going then is cancelled and is a row with
status `failed` and its `TimeoutError`; the other runs are not held up."""

from __future__ import annotations

import asyncio

import pytest

from thena_nb import Agent, Workflow
from thena_nb.core.records.model import ModelRequest, Reply
from thena_nb.models import reply
from thena_nb.store import MemoryRunStore


class HangsOn:
    """Answers at once, except for one input, where it hangs until it is cancelled. It
    notes which inputs it had answered when that happened (`answered_by_then`)."""

    name = "hangs"

    def __init__(self, hanging: str) -> None:
        self.hanging = hanging
        self.answered: list[str] = []
        self.answered_by_then: list[str] | None = None

    async def respond(self, request: ModelRequest) -> Reply:
        text = request.messages[0].content
        if text == self.hanging:
            try:
                await asyncio.Event().wait()  # only the run's time limit ends this
            except asyncio.CancelledError:
                self.answered_by_then = sorted(self.answered)
                raise
        self.answered.append(text)
        return reply.text("ok")


def test_a_run_past_run_timeout_is_a_failed_row_with_its_timeout_error() -> None:
    """The hanging run is cut off at its limit, and the others were not held up: they had
    answered by then (no clock is read here; the limit leaves them ample time)."""
    model = HangsOn("stuck")
    wf = Workflow("t", [Agent("A", model=model)])
    store = MemoryRunStore()
    exp = wf.map(["one", "stuck", "two"], run_timeout=1, concurrency=3, store=store,
                 progress=False)  # fmt: skip
    assert model.answered_by_then == ["one", "two"]
    frame = exp.frame()
    assert list(frame["status"]) == ["finished", "failed", "finished"]
    error = frame["error"][1]
    assert error.startswith("TimeoutError:") and "run_timeout=1 s" in error
    assert frame["failures"][1] == 1
    stored = store.load(exp.run_ids[1])
    assert stored.status == "failed" and stored.error == error


def test_a_run_within_run_timeout_is_untouched() -> None:
    wf = Workflow("t", [Agent("A", model=HangsOn("nobody"))])
    exp = wf.map(["one", "two"], run_timeout=5, store=False, progress=False)
    assert [r.status for r in exp.runs] == ["finished", "finished"]
    assert [r.error for r in exp.runs] == [None, None]


def test_a_model_raising_timeout_error_itself_is_not_called_a_run_timeout() -> None:
    class Raises:
        name = "raises"

        async def respond(self, request: ModelRequest) -> Reply:
            raise TimeoutError("the model's own")

    wf = Workflow("t", [Agent("A", model=Raises())])
    (run,) = wf.map(["x"], run_timeout=5, store=False, progress=False).runs
    assert run.status == "failed"
    assert run.error == "TimeoutError: the model's own"


@pytest.mark.parametrize("bad", [0, -1, float("inf"), "3", True])
def test_run_timeout_is_checked_before_any_run(bad: object) -> None:
    model = HangsOn("nobody")
    wf = Workflow("t", [Agent("A", model=model)])
    with pytest.raises(ValueError, match="`run_timeout` must be a number of seconds"):
        wf.map(["x"], run_timeout=bad, store=False, progress=False)  # type: ignore[arg-type]
