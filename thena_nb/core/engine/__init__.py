"""The engine that runs workflows: the session (stepping, breakpoints), the executor and the
turn's phases, tool gates, replay, and agents held from other frameworks (`foreign`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from thena_nb.core.records._faces import lazy_face

if TYPE_CHECKING:
    from thena_nb.core.engine.foreign import ForeignAgent as ForeignAgent
    from thena_nb.core.engine.foreign import ForeignRequest as ForeignRequest
    from thena_nb.core.engine.foreign import TurnPort as TurnPort
    from thena_nb.core.engine.gates import GateError as GateError
    from thena_nb.core.engine.gates import Gatekeeper as Gatekeeper
    from thena_nb.core.engine.session import Breakpoint as Breakpoint
    from thena_nb.core.engine.session import OpenLoop as OpenLoop
    from thena_nb.core.engine.session import Session as Session

__all__ = [
    "Breakpoint",
    "ForeignAgent",
    "ForeignRequest",
    "GateError",
    "Gatekeeper",
    "OpenLoop",
    "Session",
    "TurnPort",
]

_EXPORTS = {
    "Breakpoint": "session",
    "ForeignAgent": "foreign",
    "ForeignRequest": "foreign",
    "GateError": "gates",
    "Gatekeeper": "gates",
    "OpenLoop": "session",
    "Session": "session",
    "TurnPort": "foreign",
}

__getattr__, __dir__ = lazy_face(__name__, _EXPORTS)
