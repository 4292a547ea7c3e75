"""The building blocks of a workflow: `parallel` and `loop`.

A step is an `Agent` (one turn), a `ParallelStep`, a `LoopStep`, or a plain function
`fn(ctx)` (sync or async) for code between turns.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from thena_nb.core.records._text import callable_name

if TYPE_CHECKING:
    from thena_nb.core.parts.agent import Agent

__all__ = [
    "DEFAULT_MAX_FAILS",
    "DEFAULT_MAX_ITERATIONS",
    "LoopStep",
    "ParallelStep",
    "Step",
    "callable_name",
    "loop",
    "parallel",
    "step_name",
    "step_path",
    "walk",
]

DEFAULT_MAX_ITERATIONS = 10
"""Default `max_iterations` of `loop` (S7)."""
DEFAULT_MAX_FAILS = 5
"""Default `max_fails` of `loop` (S7)."""

Step: TypeAlias = "Agent | ParallelStep | LoopStep | Callable[..., Any]"


@dataclass(frozen=True, eq=False)
class ParallelStep:
    """Branches that run at the same time over the same state (S1–S6)."""

    steps: tuple[Step, ...]
    kind: Literal["parallel"] = field(default="parallel", init=False)

    def __repr__(self) -> str:
        return f"parallel([{', '.join(step_name(s) for s in self.steps)}])"


@dataclass(frozen=True, eq=False)
class LoopStep:
    """Steps repeated until a condition holds, a limit is reached, or the run stops (S7–S14)."""

    steps: tuple[Step, ...]
    until: Callable[..., Any]
    max_iterations: int = DEFAULT_MAX_ITERATIONS
    on_exhausted: Callable[..., Any] | None = None
    max_fails: float = DEFAULT_MAX_FAILS
    on_fail: Callable[..., Any] | None = None
    kind: Literal["loop"] = field(default="loop", init=False)

    def __repr__(self) -> str:
        parts = [f"steps=[{', '.join(step_name(s) for s in self.steps)}]"]
        parts.append(f"until={callable_name(self.until)}")
        if self.max_iterations != DEFAULT_MAX_ITERATIONS:
            parts.append(f"max_iterations={self.max_iterations}")
        if self.max_fails != DEFAULT_MAX_FAILS:
            parts.append(f"max_fails={self.max_fails}")
        return f"loop({', '.join(parts)})"


def parallel(steps: Sequence[Step]) -> ParallelStep:
    """Run `steps` at the same time, over the same state (S1).

    Every branch reads the history as it was when the block opened (S3); their turns are
    appended in declaration order (S4); afterwards `ctx.output` and `ctx.turn` are the last
    declared branch's (S5). A branch that raises cancels its siblings and the block appends
    nothing (S6).

    Example:
        >>> from thena_nb import Agent, parallel
        >>> from thena_nb.models import ScriptedModel
        >>> a = Agent("A", model=ScriptedModel(["a"]))
        >>> b = Agent("B", model=ScriptedModel(["b"]))
        >>> parallel([a, b])
        parallel([A, B])
    """
    if isinstance(steps, (str, bytes)) or not isinstance(steps, Sequence):
        raise TypeError(f"`parallel` takes a list of steps, got {steps!r}")
    return ParallelStep(tuple(steps))


def loop(
    *,
    steps: Sequence[Step],
    until: Callable[..., Any],
    max_iterations: int = DEFAULT_MAX_ITERATIONS,
    on_exhausted: Callable[..., Any] | None = None,
    max_fails: float = DEFAULT_MAX_FAILS,
    on_fail: Callable[..., Any] | None = None,
) -> LoopStep:
    """Repeat `steps` until `until` holds (S7–S14).

    When each stop is checked: before every model call, `stop` then `budget`; after every
    turn, `fails` (the consecutive failure streak reached `max_fails`); after every
    iteration, `until` and then `exhausted`.

    Args:
        steps: The steps of one iteration.
        until: `until(ctx)` or `until(ctx, state)`; truthy stops the loop. A plain function:
            an `async def` is refused when the workflow is defined (its coroutine would
            always be truthy).
        max_iterations: Stop with `exhausted` after this many iterations.
        on_exhausted: Called as `on_exhausted(ctx, iterations)` when the loop is exhausted.
        max_fails: Stop with `fails` after this many consecutive failed tool calls;
            `math.inf` turns it off.
        on_fail: Called as `on_fail(ctx, info)` with a `LoopFailure` for every failed call.

    Example:
        >>> from thena_nb import Agent, loop, until_answered
        >>> from thena_nb.models import ScriptedModel
        >>> agent = Agent("Executor", model=ScriptedModel(["done"]))
        >>> loop(steps=[agent], until=until_answered, max_iterations=8)
        loop(steps=[Executor], until=until_answered, max_iterations=8)
    """
    if isinstance(steps, (str, bytes)) or not isinstance(steps, Sequence):
        raise TypeError(f"`loop(steps=...)` takes a list of steps, got {steps!r}")
    if not callable(until):
        raise TypeError(f"`loop(until=...)` takes a function of `ctx`, got {until!r}")
    if not isinstance(max_iterations, int) or max_iterations < 1:
        raise ValueError(f"`max_iterations` must be a whole number >= 1, got {max_iterations!r}")
    if not (max_fails == math.inf or (isinstance(max_fails, int) and max_fails >= 1)):
        raise ValueError(
            f"`max_fails` must be a whole number >= 1 or `math.inf`, got {max_fails!r}"
        )
    return LoopStep(
        tuple(steps),
        until,
        max_iterations=max_iterations,
        on_exhausted=on_exhausted,
        max_fails=max_fails,
        on_fail=on_fail,
    )


def step_name(step: Any) -> str:
    """The name a step has in step paths: the agent's or function's name, `parallel`, `loop`."""
    kind = getattr(step, "kind", None)
    if kind == "parallel" or kind == "loop":
        return str(kind)
    name = getattr(step, "name", None) or getattr(step, "__name__", None)  # callable_name
    return str(name) if name else repr(step)


def step_path(parent: str, index: int, step: Any) -> str:
    """The one function that builds step paths: `review/1.loop/0.ExecutorAgent`."""
    return f"{parent}/{index}.{step_name(step)}"


def walk(steps: Sequence[Any], parent: str) -> Iterator[tuple[str, Any]]:
    """Every step below `parent`, in pre-order, with its step path: the one step-tree walk.

    Example:
        >>> from thena_nb import Agent, loop, parallel, until_answered
        >>> from thena_nb.models import ScriptedModel
        >>> a, b = (Agent(n, model=ScriptedModel(["ok"])) for n in "AB")
        >>> [path for path, _ in walk([parallel([a, loop(steps=[b], until=until_answered)])], "w")]
        ['w/0.parallel', 'w/0.parallel/0.A', 'w/0.parallel/1.loop', 'w/0.parallel/1.loop/0.B']
    """
    for i, step in enumerate(steps):
        path = step_path(parent, i, step)
        yield path, step
        children = getattr(step, "steps", None)
        if isinstance(children, tuple):
            yield from walk(children, path)
