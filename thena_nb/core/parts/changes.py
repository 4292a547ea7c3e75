"""Changes to a workflow, for fork and experiments: `apply_changes` and `grid`.

A changes dict maps agent names or step paths to dicts of fields to replace, e.g.
`{"Executor": {"system": "Be brief."}, "review/1.loop": {"max_iterations": 5}}`.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from typing import Any, TypeVar

from thena_nb.core.parts.agent import Agent
from thena_nb.core.parts.plan import Plan
from thena_nb.core.parts.steps import LoopStep, ParallelStep, loop, parallel, step_path, walk

_W = TypeVar("_W", bound=Plan)

__all__ = ["Changes", "apply_changes", "grid"]

Changes = Mapping[str, Mapping[str, Any]]
"""`{agent name or step path: {field: new value}}`."""

_LOOP_FIELDS = ("steps", "until", "max_iterations", "on_exhausted", "max_fails", "on_fail")
_WORKFLOW_FIELDS = ("budget", "retry", "tool_timeout", "max_tool_result_chars")


def apply_changes(workflow: _W, changes: Changes | None) -> _W:
    """A copy of `workflow` with some agents and steps changed (the workflow is untouched).

    Args:
        workflow: The workflow to change.
        changes: `{key: {field: value}}`. A key is an agent name (every step of that agent
            changes, through `Agent.replace`), a step path (`"review/1.loop"`: a loop's
            `steps`, `until`, `max_iterations`, `on_exhausted`, `max_fails`, `on_fail`; a
            parallel block's `steps`; an agent's fields), or the workflow's name (`budget`,
            `retry`, `tool_timeout`, `max_tool_result_chars`).

    Raises:
        ValueError: A key names no agent or step (the message lists the valid ones), or a
            field does not exist.

    Example:
        >>> from thena_nb import Agent, Workflow, loop, until_answered
        >>> from thena_nb.models import ScriptedModel
        >>> wf = Workflow("w", [loop(steps=[Agent("A", model=ScriptedModel(["ok"]))],
        ...                          until=until_answered)])
        >>> brief = apply_changes(wf, {"A": {"system": "Be brief."},
        ...                            "w/0.loop": {"max_iterations": 3}})
        >>> changed = brief.steps[0]
        >>> changed.max_iterations, changed.steps[0].system, wf.steps[0].max_iterations
        (3, 'Be brief.', 10)
    """
    if not changes:
        return workflow
    names, paths = _targets(workflow)
    unknown = [k for k in changes if k not in names and k not in paths and k != workflow.name]
    if unknown:
        raise ValueError(
            f"workflow {workflow.name!r} has no agent or step {unknown[0]!r}. "
            f"Agents: {', '.join(map(repr, sorted(names))) or 'none'}. "
            f"Step paths: {', '.join(map(repr, paths))}."
        )
    for key, fields in changes.items():
        if not isinstance(fields, Mapping):
            raise TypeError(f"changes[{key!r}] must be a dict of fields to replace, got {fields!r}")
    steps = [
        _changed(step, step_path(workflow.name, i, step), changes)
        for i, step in enumerate(workflow.steps)
    ]
    own = dict(changes.get(workflow.name, {})) if workflow.name not in names else {}
    bad = sorted(set(own) - set(_WORKFLOW_FIELDS))
    if bad:
        raise ValueError(
            f"workflow {workflow.name!r} has no changeable field {bad[0]!r}; "
            f"changeable fields: {', '.join(_WORKFLOW_FIELDS)}"
        )
    # The workflow's own class builds the copy (this module sits below `workflow`).
    return type(workflow)(
        workflow.name,
        steps,
        state=workflow.state,
        budget=own.get("budget", workflow.budget),
        retry=own.get("retry", workflow.retry),
        tool_timeout=own.get("tool_timeout", workflow.tool_timeout),
        max_tool_result_chars=own.get("max_tool_result_chars", workflow.max_tool_result_chars),
    )


def _targets(workflow: Plan) -> tuple[set[str], list[str]]:
    names: set[str] = set()
    paths: list[str] = []
    for path, step in walk(workflow.steps, workflow.name):
        paths.append(path)
        if isinstance(step, Agent):
            names.add(step.name)
    return names, paths


def _changed(step: Any, path: str, changes: Changes) -> Any:
    own = dict(changes.get(path, {}))
    if isinstance(step, Agent):
        fields = {**changes.get(step.name, {}), **own}
        return step.replace(**fields) if fields else step
    if isinstance(step, (ParallelStep, LoopStep)):
        subs = tuple(_changed(s, step_path(path, i, s), changes) for i, s in enumerate(step.steps))
        allowed = _LOOP_FIELDS if isinstance(step, LoopStep) else ("steps",)
        bad = sorted(set(own) - set(allowed))
        if bad:
            raise ValueError(
                f"{step.kind} {path!r} has no changeable field {bad[0]!r}; "
                f"changeable fields: {', '.join(allowed)}"
            )
        if isinstance(step, ParallelStep):
            return parallel(own.get("steps", subs)) if own or subs != step.steps else step
        if not own and subs == step.steps:
            return step
        fields = {name: getattr(step, name) for name in _LOOP_FIELDS}
        fields["steps"] = subs
        fields.update(own)
        return loop(**fields)
    if own:
        raise ValueError(
            f"function step {path!r} has no fields to change; replace it in the workflow's "
            f"steps instead"
        )
    return step


def grid(**axes: Mapping[str, Changes]) -> dict[str, dict[str, dict[str, Any]]]:
    """The cross product of several variant maps, ready for `variants=`.

    Each axis maps a value name to a changes dict. Every combination becomes one variant
    named `"axis=value,axis=value"` (axes in the order given) whose changes are the merged
    changes of its values.

    Args:
        **axes: Axis name to `{value name: changes}`.

    Returns:
        Variant name to merged changes.

    Raises:
        ValueError: An axis is empty, or two axes set the same field of the same step to
            different values.

    Example:
        >>> from thena_nb import grid, loop
        >>> variants = grid(
        ...     prompt={"brief": {"Executor": {"system": "Be brief."}},
        ...             "chatty": {"Executor": {"system": "Explain."}}},
        ...     stop={"five": {"demo/0.loop": {"max_iterations": 5}}, "default": {}})
        >>> list(variants)
        ['prompt=brief,stop=five', 'prompt=brief,stop=default', 'prompt=chatty,stop=five', 'prompt=chatty,stop=default']
        >>> variants["prompt=brief,stop=five"]
        {'Executor': {'system': 'Be brief.'}, 'demo/0.loop': {'max_iterations': 5}}
    """  # noqa: E501
    for axis, values in axes.items():
        if not isinstance(values, Mapping) or not values:
            raise ValueError(
                f"grid axis {axis!r} must map value names to changes dicts, got {values!r}"
            )
    out: dict[str, dict[str, dict[str, Any]]] = {}
    names = list(axes)
    for combo in itertools.product(*(axes[a].items() for a in names)):
        label = ",".join(f"{axis}={value}" for axis, (value, _) in zip(names, combo, strict=True))
        merged: dict[str, dict[str, Any]] = {}
        for (value, changes), axis in zip(combo, names, strict=True):
            for key, fields in _check_changes(changes, f"grid axis {axis!r} value {value!r}"):
                target = merged.setdefault(key, {})
                for field, new in fields.items():
                    if field in target and target[field] is not new and target[field] != new:
                        raise ValueError(
                            f"grid variant {label!r}: two axes set {key!r}.{field} "
                            f"({target[field]!r} and {new!r}); give each axis its own fields"
                        )
                    target[field] = new
        out[label] = merged
    return out


def _check_changes(changes: Any, where: str) -> Iterator[tuple[str, Mapping[str, Any]]]:
    if not isinstance(changes, Mapping):
        raise ValueError(f"{where}: changes must be a dict of dicts, got {changes!r}")
    for key, fields in changes.items():
        if not isinstance(key, str) or not isinstance(fields, Mapping):
            raise ValueError(
                f"{where}: changes map agent names or step paths to dicts of fields, got "
                f"{key!r}: {fields!r}"
            )
        yield key, fields
