"""The errors thena_nb raises on its own.

```
ThenaError                   everything thena_nb raises on its own
├── WorkflowDefinitionError  the definition is wrong; raised before any model call (S9)
├── ModelError               a model call failed after retries; .model_name; __cause__ = SDK's
│   ├── TransientModelError  worth retrying (rate limit, overload, timeout); .retry_after
│   └── ScriptExhaustedError a ScriptedModel ran out; names the model and the call number
└── StoreError               the run store could not read or write
```

Exceptions raised by user code (a function step, `until`, `on_fail`, `on_exhausted`) are not
wrapped: they propagate unchanged with a note naming the step path.
"""

from __future__ import annotations

__all__ = [
    "ModelError",
    "ScriptExhaustedError",
    "StoreError",
    "ThenaError",
    "TransientModelError",
    "WorkflowDefinitionError",
]


class ThenaError(Exception):
    """Base class of every error thena_nb raises on its own."""


class WorkflowDefinitionError(ThenaError, ValueError):
    """A workflow definition is wrong; raised before any model call is made."""


class ModelError(ThenaError):
    """A model call failed.

    Args:
        message: What went wrong, in words a user can act on.
        model_name: The model that failed, when known.
        status_code: The HTTP status of the API error, when there was one.
    """

    def __init__(
        self, message: str, *, model_name: str | None = None, status_code: int | None = None
    ) -> None:
        super().__init__(message)
        self.model_name = model_name
        self.status_code = status_code


class TransientModelError(ModelError):
    """A model call failed in a way worth retrying (rate limit, overload, timeout, reset).

    The executor retries it under the workflow's `RetryPolicy` (S25).

    Args:
        message: What went wrong.
        retry_after: Seconds the server asked us to wait, when it said.
        model_name: The model that failed, when known.
        status_code: The HTTP status, when there was one.
    """

    def __init__(
        self,
        message: str,
        *,
        retry_after: float | None = None,
        model_name: str | None = None,
        status_code: int | None = None,
    ) -> None:
        super().__init__(message, model_name=model_name, status_code=status_code)
        self.retry_after = retry_after


class ScriptExhaustedError(ModelError):
    """A `ScriptedModel` was called more times than it has replies."""


class StoreError(ThenaError):
    """The run store could not read or write."""
