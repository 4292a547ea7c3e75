"""Run stores: where runs are kept as they happen, so they can be loaded, resumed and forked.

`base` has the protocols and the turn record every store receives, `memory` the reference
`MemoryRunStore`, `sqlite` the `SqliteRunStore`, and `default` the store `wf.run()` uses when
no `store=` is given. Users import stores from `thena_nb.store`. This package's own face
names only what loads no `sqlite3` (the core imports it while `import thena_nb` runs).
"""

from thena_nb.core.store.base import (
    STORE_FORMAT,
    RunRecorder,
    RunStore,
    TurnRecord,
    rebuild_run,
    records_of,
    request_parts_of,
    resolve_store,
)
from thena_nb.core.store.memory import MemoryRunStore

__all__ = [
    "STORE_FORMAT",
    "MemoryRunStore",
    "RunRecorder",
    "RunStore",
    "TurnRecord",
    "rebuild_run",
    "records_of",
    "request_parts_of",
    "resolve_store",
]
