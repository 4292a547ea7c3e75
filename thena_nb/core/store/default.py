"""The default run store: where runs go when `store=` is not given.

It is the SQLite file named by `THENA_NB_STORE` (`"off"` or `""` turns it off), else
`runs.sqlite3` under the user's data directory. Importing this module loads `sqlite3`;
the core reaches it lazily (`thena_nb.core._portals.default_store`), so `import thena_nb`
does not.
"""

from __future__ import annotations

import os
import threading
import warnings
from pathlib import Path

from thena_nb.core.records.errors import StoreError
from thena_nb.core.store import _absent
from thena_nb.core.store.base import RunStore
from thena_nb.core.store.sqlite import SqliteRunStore

__all__ = ["ENV_VAR", "default_store", "default_store_path"]

ENV_VAR = "THENA_NB_STORE"
"""Names the default store's file; `"off"` or `""` turns the default store off."""

_OFF = frozenset({"", "off"})

_defaults: dict[tuple[int, str], SqliteRunStore] = {}
_defaults_lock = threading.Lock()
_Setting = tuple[int, str | None, str | None, str | None, str]
_last: tuple[_Setting, tuple[int, str], SqliteRunStore] | None = None
"""The setting of the last lookup, its key in `_defaults` and its store: every `wf.run()`
asks, and working the path out again costs more than a one-turn run's own bookkeeping."""


def default_store_path() -> Path | None:
    """Where the default store keeps runs, or `None` when it is turned off.

    `THENA_NB_STORE` names the file (`"off"` or `""` turns the store off); otherwise it is
    `$XDG_DATA_HOME/thena_nb/runs.sqlite3`, or `~/.local/share/thena_nb/runs.sqlite3`.
    """
    value = os.environ.get(ENV_VAR)
    if value is not None:
        value = value.strip()
        if value.lower() in _OFF:
            return None
        return Path(value).expanduser()
    data_home = os.environ.get("XDG_DATA_HOME", "").strip()
    base = Path(data_home) if os.path.isabs(data_home) else Path.home() / ".local" / "share"
    return base / "thena_nb" / "runs.sqlite3"


def default_store() -> RunStore | None:
    """The store runs go to when `store=` is not given, or `None` when it is turned off.

    One `SqliteRunStore` per file, shared by every run of the process. A file that cannot
    be created gives a warning and no store, so runs still work.
    """
    global _last
    env = os.environ  # (a relative path in it depends on the working directory)
    setting = (
        os.getpid(), env.get(ENV_VAR), env.get("XDG_DATA_HOME"), env.get("HOME"), os.getcwd()
    )  # fmt: skip
    last = _last
    if last is not None and last[0] == setting and _defaults.get(last[1]) is last[2]:
        return last[2]
    path = default_store_path()
    if path is None:
        _absent.why[0] = f"{ENV_VAR} is {env.get(ENV_VAR, '')!r}"
        return None
    key = (os.getpid(), os.path.abspath(path))  # a forked child opens its own connection
    with _defaults_lock:
        store = _defaults.get(key)
        if store is None:
            try:
                path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                store = SqliteRunStore(path)
            except (OSError, StoreError) as exc:
                # Said again by every later "no store" error, which must not call it off.
                _absent.why[0] = f"the default store {str(path)!r} could not be opened ({exc})"
                warnings.warn(
                    f"thena_nb: runs are not being stored: cannot open {str(path)!r} ({exc}). "
                    f"Set {ENV_VAR} to a writable file, or to 'off'.",
                    RuntimeWarning,
                    stacklevel=2,
                )
                return None
            if store.read_only:
                warnings.warn(
                    f"thena_nb: the run store {str(path)!r} is read-only: its runs can be "
                    "listed and loaded, but a run that uses it raises StoreError. Set "
                    f"{ENV_VAR} to a writable file, or pass store=False",
                    RuntimeWarning,
                    stacklevel=2,
                )
            _defaults[key] = store
        _last = (setting, key, store)
    return store
