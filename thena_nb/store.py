"""Run stores: where runs are kept, turn by turn, for replay, fork and resume.

Every run goes to the default store (`THENA_NB_STORE`, or a SQLite file under the user's
data directory) unless `store=` names another, or `store=False` keeps it in memory only.
A store of your own implements `RunStore` and can run the contract suite that ours pass,
`thena_nb.store_contract` (its docstring shows the two files to write).

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

from thena_nb.core.records.errors import StoreError
from thena_nb.core.store._owner import ABANDONED, RunInUse
from thena_nb.core.store._sqlite_file import APPLICATION_ID
from thena_nb.core.store.base import RunRecorder, RunStore, TurnRecord, records_of
from thena_nb.core.store.default import ENV_VAR, default_store, default_store_path
from thena_nb.core.store.memory import MemoryRunStore
from thena_nb.core.store.sqlite import SqliteRunStore

__all__ = [
    "ABANDONED",
    "APPLICATION_ID",
    "ENV_VAR",
    "MemoryRunStore",
    "RunInUse",
    "RunRecorder",
    "RunStore",
    "SqliteRunStore",
    "StoreError",
    "TurnRecord",
    "default_store",
    "default_store_path",
    "records_of",
]
