"""Who runs a stored run: claims, leases, and how a run whose process died is shown.

A store claims a run for one writer before its first turn (`run_started`): the run's row
names its owner (`host:pid:token`, one token per store object) and a lease. Another writer
that finds the run `"running"` under an owner still alive is refused (`RunInUse`). An owner
is alive while its process exists, when it is on this host, or else while its lease lasts
(each store renews its runs' leases as it writes their turns). A `"running"` run whose owner
is not alive is shown as `"abandoned"`; it can be resumed.
"""

from __future__ import annotations

import os
import socket
import uuid
from contextvars import ContextVar

from thena_nb.core.records.errors import StoreError

__all__ = [
    "ABANDONED",
    "ENDED",
    "LEASE_S",
    "RunInUse",
    "hold",
    "holds",
    "keep_ended",
    "keep_stored",
    "new_owner",
    "owner_alive",
    "owner_label",
    "refuses",
    "release",
    "shown_status",
]

LEASE_S = 600.0
"""Seconds a claim lasts without a renewal, for an owner on another host."""

ABANDONED = "abandoned"
"""The status shown for a run left `"running"` by a process that is gone."""

_HOST = socket.gethostname()


class RunInUse(StoreError):
    """Another writer is running this run right now (or, for a claim that takes only new
    runs, has made it already); it is not written twice.

    Attributes:
        run_id: The run.
        owner: Who holds (or made) it (`host:pid:token`).
        status: The run's stored status (`"running"` while another writer holds it).
    """

    def __init__(
        self, run_id: str, owner: str, where: str, status: str = "running", *, stored: bool = False
    ) -> None:
        if stored:
            message = (
                f"run {run_id!r} is stored already in {where} ({status}); a run started with "
                f"`run_id=` does not replace a stored run: give it another run_id, load the "
                f"stored one (`Run.load`), finish it (`wf.resume`), or pass `overwrite=True` "
                f"to replace it"
            )
        else:
            if status == "running":
                said = f"is being run right now by {owner_label(owner)} in {where}"
            else:
                said = f"was made meanwhile by {owner_label(owner)} in {where} ({status})"
            message = (
                f"run {run_id!r} {said}; wait for it to end (then load or resume it), or give "
                "this run another run_id"
            )
        super().__init__(message)
        self.run_id = run_id
        self.owner = owner
        self.status = status


keep_ended: ContextVar[frozenset[str]] = ContextVar("keep_ended", default=frozenset())
"""Stored statuses a claim made in this context does not overwrite (`RunInUse` instead):
an experiment sets the statuses it reuses, so a run another process finished between its
look-up and its claim is reused, not made twice."""


keep_stored: ContextVar[bool] = ContextVar("keep_stored", default=False)
"""Whether a claim made in this context refuses any run the store has ended already
(`RunInUse` with `stored=True`): `wf.run(..., run_id=...)` sets it unless `overwrite=True`,
so that a run id given again never replaces a stored run silently."""

ENDED = frozenset({"finished", "failed", "stopped", "budget", "waiting"})
"""The stored statuses of runs that ended (a row left `"running"` by a process that is gone,
`ABANDONED`, is not one: its id may be run again)."""


def refuses(status: str | None) -> tuple[bool, bool]:
    """Whether a claim in this context refuses a stored run of `status`, and whether it
    does so because the run is stored already (`keep_stored`) rather than made meanwhile."""
    if status is None:
        return False, False
    if status in keep_ended.get():
        return True, False
    if keep_stored.get() and status in ENDED:
        return True, True
    return False, False


def new_owner() -> str:
    """A fresh owner name for one store object of this process (registered: its runs
    count as running only while it has them open)."""
    owner = f"{_HOST}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    _open.setdefault(owner, set())
    return owner


def owner_label(owner: str) -> str:
    """`owner` in words: its process and host."""
    host, _, pid = owner.rpartition(":")[0].rpartition(":")
    return f"process {pid} on {host!r}" if host else f"owner {owner!r}"


def owner_alive(owner: str, lease_until: float | None, now: float) -> bool:
    """Whether the writer `owner` may still be running: its process exists (this host), or
    its lease has not run out (another host)."""
    head, _, _token = owner.rpartition(":")
    host, _, pid_text = head.rpartition(":")
    if host == _HOST and pid_text.isdigit():
        return _pid_alive(int(pid_text))
    return lease_until is not None and lease_until > now


def _pid_of(owner: str) -> int:
    pid = owner.rpartition(":")[0].rpartition(":")[2]
    return int(pid) if pid.isdigit() else -1


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    except OSError:  # pragma: no cover - signals unsupported: trust the lease alone
        return False
    return True


def shown_status(
    run_id: str, status: str, owner: str | None, lease_until: float | None, now: float
) -> str:
    """The status to show for a stored run: `"abandoned"` for a `"running"` run whose
    writer is gone (a run of this process's own stores is running while one has it open)."""
    if status != "running" or owner is None:
        return status
    held = _open.get(owner)
    if held is not None and _pid_of(owner) == os.getpid():  # not a forked parent's
        return status if run_id in held else ABANDONED
    return status if owner_alive(owner, lease_until, now) else ABANDONED


_open: dict[str, set[str]] = {}
"""The runs each of this process's store objects has open, by owner name."""


def hold(owner: str, run_id: str) -> bool:
    """Note that `owner` (a store of this process) runs `run_id` now; `False` when it
    already does (the same run twice at once)."""
    held = _open.setdefault(owner, set())
    if run_id in held:
        return False
    held.add(run_id)
    return True


def release(owner: str, run_id: str) -> None:
    """`owner` no longer runs `run_id`."""
    _open.setdefault(owner, set()).discard(run_id)


def holds(owner: str, run_id: str) -> bool:
    """Whether `owner` (a store of this process) runs `run_id` now."""
    held = _open.get(owner)
    return held is not None and run_id in held
