"""Sending an experiment's workflows to Ray workers: serialised once, and when something
cannot be serialised, an error that names it (the agent and its model, tool or stop
condition), not whatever the pickler was looking at when it failed."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from thena_nb.core.parts.steps import walk
from thena_nb.core.workflow import Workflow

__all__ = ["dumps_workflows", "loads_workflows", "unserialisable_part"]


def dumps_workflows(workflows: Mapping[str, Workflow]) -> bytes:
    """The variants' workflows as bytes for `loads_workflows` in a Ray worker.

    Raises:
        TypeError: Some part cannot be serialised; the message names it and why.
    """
    cloudpickle = _cloudpickle()
    try:
        blob: bytes = cloudpickle.dumps(dict(workflows))
    except Exception as exc:
        found = unserialisable_part(workflows)
        where = found or f"the workflow ({type(exc).__name__}: {exc})"
        raise TypeError(
            f"backend='ray' cannot send this experiment to its workers: {where}. Make it "
            f"picklable, or build it inside a function the workers can import"
        ) from exc
    return blob


def loads_workflows(blob: bytes) -> dict[str, Workflow]:
    """The workflows `dumps_workflows` sent."""
    workflows: dict[str, Workflow] = _cloudpickle().loads(blob)
    return workflows


def unserialisable_part(workflows: Mapping[str, Workflow]) -> str | None:
    """What in `workflows` cannot be serialised, as a phrase naming it and the error, or
    `None` when every part can.

    Example:
        >>> import threading
        >>> from thena_nb import Agent, Workflow
        >>> from thena_nb.models import ScriptedModel
        >>> model = ScriptedModel(["hi"])
        >>> model.lock = threading.Lock()
        >>> found = unserialisable_part({"base": Workflow("w", [Agent("A", model=model)])})
        >>> print(found[:59])
        the model of agent 'A' (ScriptedModel(1 replies)) cannot be
        >>> found.endswith("TypeError: cannot pickle '_thread.lock' object")
        True
    """
    cloudpickle = _cloudpickle()
    for what, value in _parts(workflows):
        try:
            cloudpickle.dumps(value)
        except Exception as exc:
            shown = repr(value)
            if len(shown) > 80:
                shown = shown[:77] + "..."
            return f"{what} ({shown}) cannot be serialised: {type(exc).__name__}: {exc}"
    return None


def _parts(workflows: Mapping[str, Workflow]) -> Iterator[tuple[str, Any]]:
    """Every part of every workflow that a user gave, named: steps' attributes (a list's
    items one by one, e.g. each tool), then the workflow's own."""
    for wf in workflows.values():
        for path, step in walk(wf.steps, wf.name):
            name = getattr(step, "name", None)
            label = repr(name) if isinstance(name, str) else repr(path)
            owner = f"{type(step).__name__.lower()} {label}"
            yield from _attributes(step, owner)
        yield from _attributes(wf, f"workflow {wf.name!r}", skip=("steps",))


def _attributes(obj: Any, owner: str, skip: tuple[str, ...] = ()) -> Iterator[tuple[str, Any]]:
    for name, value in getattr(obj, "__dict__", {}).items():
        if name.startswith("_") or name in skip or name == "steps":
            continue
        if isinstance(value, list | tuple):
            for i, item in enumerate(value):
                label = getattr(item, "name", None)
                item_name = f"{name}[{i}] {label!r}" if isinstance(label, str) else f"{name}[{i}]"
                yield f"the {item_name} of {owner}", item
        else:
            yield f"the {name} of {owner}", value


def _cloudpickle() -> Any:
    from ray import cloudpickle

    return cloudpickle
