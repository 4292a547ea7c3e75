"""`Case`: one input of an experiment, with what a scorer may compare the run against.

`as_cases` turns what `wf.map` is given (strings, `Case`s, or a pydantic-evals `Dataset` and
its cases) into a list of `Case`s. pydantic-evals is never imported: its objects are read by
their attributes (`inputs`, `expected_output`, `name`, `metadata`), so this module loads
nothing beyond the standard library.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

__all__ = ["Case", "as_cases"]


@dataclasses.dataclass(frozen=True, slots=True)  # one per input: kept small
class Case:
    """One input of an experiment and what its runs are scored against.

    Args:
        input: What the workflow runs on (converted with `str` when it is not a string).
        expected: The expected output, for scorers such as `equals()` that read it.
        name: A short name, shown in `exp.frame()`'s `case` column.
        metadata: Anything else a scorer of your own may want (`case.metadata`).

    Example:
        >>> from thena_nb import Case
        >>> Case("What is 2 + 2?", expected="4", name="sum")
        Case(input='What is 2 + 2?', expected='4', name='sum')
    """

    input: Any
    expected: Any = None
    name: str | None = None
    metadata: Any = None

    @property
    def text(self) -> str:
        """The input as the workflow receives it."""
        return self.input if isinstance(self.input, str) else str(self.input)

    def __repr__(self) -> str:
        fields = [f"input={self.input!r}"]
        for field in ("expected", "name", "metadata"):
            value = getattr(self, field)
            if value is not None:
                fields.append(f"{field}={value!r}")
        return f"Case({', '.join(fields)})"


def as_cases(inputs: Any) -> list[Case]:
    """The cases of an experiment: each string, `Case` or pydantic-evals case, in order.

    Args:
        inputs: An iterable of strings (or other inputs), `Case`s and pydantic-evals cases,
            or a pydantic-evals `Dataset`.

    Returns:
        One `Case` per input.

    Raises:
        TypeError: `inputs` is a single string.

    Example:
        >>> as_cases(["a", Case("b", expected="B")])
        [Case(input='a'), Case(input='b', expected='B')]
    """
    if isinstance(inputs, str | bytes):
        raise TypeError(f"`inputs` is a list of inputs, got the single input {inputs!r}")
    if _from_pydantic_evals(inputs) and hasattr(inputs, "cases"):
        inputs = inputs.cases  # a `Dataset`
    return [_as_case(item) for item in _iterable(inputs)]


def _iterable(inputs: Any) -> Iterable[Any]:
    if not isinstance(inputs, Iterable):
        raise TypeError(f"`inputs` is a list of inputs or cases, got {inputs!r}")
    return inputs


def _as_case(item: Any) -> Case:
    if isinstance(item, Case):
        return item
    if _from_pydantic_evals(item) and hasattr(item, "inputs"):
        return Case(
            item.inputs, expected=item.expected_output, name=item.name, metadata=item.metadata
        )
    return Case(item)


def _from_pydantic_evals(obj: Any) -> bool:
    """Whether `obj` is one of pydantic-evals' objects (told by its class's module)."""
    return type(obj).__module__.split(".")[0] == "pydantic_evals"
