"""Run stores: where runs are kept, turn by turn, for replay, fork and resume.

Every run goes to the default store (`THENA_NB_STORE`, or a SQLite file under the user's
data directory) unless `store=` names another, or `store=False` keeps it in memory only.

Example:
    >>> import tempfile, pathlib
    >>> from thena_nb import Agent, Run, Workflow
    >>> from thena_nb.models import ScriptedModel
    >>> from thena_nb.store import SqliteRunStore
    >>> wf = Workflow("hello", [Agent("A", model=ScriptedModel(["Hi!"]))])
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     with SqliteRunStore.from_path(pathlib.Path(tmp) / "runs.sqlite3") as store:
    ...         run = wf.run("hi", store=store)
    ...         Run.load(run.run_id, store=store).output
    'Hi!'
"""

from thena_nb.core.store import (
    MemoryRunStore,
    RunStore,
    SqliteRunStore,
    StoreError,
    default_store,
    default_store_path,
)

__all__ = [
    "MemoryRunStore",
    "RunStore",
    "SqliteRunStore",
    "StoreError",
    "default_store",
    "default_store_path",
]
