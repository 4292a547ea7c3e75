"""Which stored runs an experiment takes again, what changed for the others, and which parts
of a fingerprint are state.

Each variant's fingerprint (its parts, see `_fingerprint`) is kept in the store beside its
runs, as a *record*: the parts when the experiment began, the digest its runs' ids were made
from, and the names of the parts found to be state. A variant reuses the runs of the newest
record whose parts equal its own, state left out; its runs then keep that record's ids.
When none does, its runs get new ids, and `changed` names the parts that differ from the
newest record's. When the experiment ends, the variants are fingerprinted again: the parts
that changed while it ran are state, kept in the record from then on.

A store without `fingerprints` and `keep_fingerprint` (one of your own) reuses a run only
while every part is as it was (state included), as before this record existed.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Mapping
from typing import Any

from thena_nb.core.records.errors import StoreError
from thena_nb.core.workflow import Workflow
from thena_nb.experiments._fingerprint import Fingerprint, Unfingerprintable, fingerprint_of

__all__ = ["RECORD_FORMAT", "Reuse", "fingerprint_or_reason"]

RECORD_FORMAT = 1
"""The version of a stored fingerprint record; records of a newer one are passed over."""

_SHOWN = 6
"""Changed parts named in `changed`, at most (then how many more)."""


def fingerprint_or_reason(workflow: Workflow) -> tuple[Fingerprint | None, str]:
    """The workflow's fingerprint, or `None` and why it has none."""
    try:
        return fingerprint_of(workflow), ""
    except Unfingerprintable as exc:
        return None, str(exc)


@dataclasses.dataclass
class _Variant:
    """One variant's fingerprint and what the store knows of it."""

    key: str
    fingerprint: Fingerprint | None
    records: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    state: set[str] = dataclasses.field(default_factory=set)
    match: dict[str, Any] | None = None
    """The newest record whose parts are the variant's own (state left out)."""

    @property
    def base(self) -> str | None:
        """The digest the variant's run ids are made from."""
        if self.fingerprint is None:
            return None
        if self.match is not None:
            return str(self.match["digest"])
        return self.fingerprint.digest(self.state)

    @property
    def nearest(self) -> dict[str, Any] | None:
        """The record to say what changed against: the newest one."""
        return self.records[0] if self.records else None


class Reuse:
    """The reuse of one experiment: `prepare` before its runs, `why` for the runs it did not
    take from the store, `finish` once it ended."""

    def __init__(
        self,
        workflow_name: str,
        fingerprints: Mapping[str, Fingerprint | None],
        store: Any,
        *,
        enabled: bool = True,
    ) -> None:
        self.store = store
        self.enabled = enabled
        self.variants = {
            name: _Variant(_key(workflow_name, name), fp) for name, fp in fingerprints.items()
        }
        self._kept = store is not None and callable(getattr(store, "fingerprints", None))

    async def prepare(self) -> dict[str, str | None]:
        """Find each variant's records; return the digest each variant's run ids are made
        from (`None`: not fingerprinted). With reuse off, its stored runs are forgotten."""
        if self._kept:
            found = await asyncio.to_thread(self._load)
            for name, records in found.items():
                self._match(self.variants[name], records)
        return {name: v.base for name, v in self.variants.items()}

    def _load(self) -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = {}
        for name, variant in self.variants.items():
            if variant.fingerprint is None:
                continue
            try:
                records = self.store.fingerprints(variant.key)
            except StoreError:  # an older file that cannot be written has none
                records = []
            out[name] = [r for r in records if r.get("format") == RECORD_FORMAT]
        return out

    def _match(self, variant: _Variant, records: list[dict[str, Any]]) -> None:
        fp = variant.fingerprint
        assert fp is not None
        variant.records = records
        variant.state = {name for r in records for name in r.get("state", ())}
        for record in records:
            if not fp.changed(record["parts"], variant.state):
                variant.match = record
                return

    def nearest_base(self, variant: str) -> str | None:
        """The digest of the newest record when it is not the variant's own (its runs are
        what `changed` compares with)."""
        v = self.variants[variant]
        nearest = v.nearest
        if v.match is not None or nearest is None:
            return None
        return str(nearest["digest"])

    def why(self, variant: str, status: str | None, nearest_stored: bool) -> str:
        """Why a run of `variant` was not taken from the store.

        Args:
            variant: The run's variant.
            status: The stored status of the run's own id (`None`: not stored).
            nearest_stored: The newest record's run for the same input is stored.
        """
        v = self.variants[variant]
        if v.fingerprint is None:
            return "cannot be fingerprinted"
        if self.store is None:
            return "no store"
        if not self.enabled:
            return "reuse=False"
        nearest = v.nearest
        if v.match is None and nearest is not None and nearest_stored:
            names = v.fingerprint.changed(nearest["parts"], v.state)
            shown = ", ".join(names[:_SHOWN])
            return shown + (f" (+{len(names) - _SHOWN} more)" if len(names) > _SHOWN else "")
        return "no stored run" if status is None else f"stored run {status}"

    async def finish(self, workflows: Mapping[str, Workflow]) -> None:
        """Fingerprint each variant again: the parts that changed while the experiment ran
        are state; keep them, with the variant's record, in the store."""
        writes = self._records_to_keep(workflows)
        if writes:
            await asyncio.to_thread(self._write, writes)

    def finish_now(self, workflows: Mapping[str, Workflow]) -> None:
        """`finish`, on this thread: for an experiment ended by an exception, whose loop may
        not run again."""
        self._write(self._records_to_keep(workflows))

    def _records_to_keep(self, workflows: Mapping[str, Workflow]) -> list[tuple[str, Any]]:
        if not self._kept:
            return []
        writes: list[tuple[str, dict[str, Any]]] = []
        for name, v in self.variants.items():
            fp = v.fingerprint
            if fp is None:
                continue
            after, _ = fingerprint_or_reason(workflows[name])
            found = set(fp.changed(after.parts)) if after is not None else set()
            record = v.match
            if record is not None and found <= set(record.get("state", ())):
                continue
            if record is None:
                record = {"format": RECORD_FORMAT, "digest": v.base, "parts": dict(fp.parts)}
            writes.append((v.key, {**record, "state": sorted(v.state | found)}))
        return writes

    def _write(self, writes: list[tuple[str, dict[str, Any]]]) -> None:
        for key, record in writes:
            with contextlib.suppress(StoreError):  # a read-only store: nothing to keep
                self.store.keep_fingerprint(key, record)


def _key(workflow_name: str, variant: str) -> str:
    return f"{workflow_name}\x1f{variant}"
