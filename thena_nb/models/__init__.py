"""Models: offline ones for tests and teaching, and adapters for real APIs.

`AnthropicModel` and `OpenAICompatModel` load on first use, so importing this package does
not import their SDKs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from thena_nb.core.records.errors import ModelError, TransientModelError
from thena_nb.core.records.model import Model, ModelRequest, Reply, ToolSpec
from thena_nb.core.records.types import RetryPolicy
from thena_nb.models import reply
from thena_nb.models.function import FunctionModel
from thena_nb.models.scripted import ScriptedModel

if TYPE_CHECKING:
    from thena_nb.models.anthropic import AnthropicModel
    from thena_nb.models.openai_compat import OpenAICompatModel

__all__ = [
    "AnthropicModel",
    "FunctionModel",
    "Model",
    "ModelError",
    "ModelRequest",
    "OpenAICompatModel",
    "Reply",
    "RetryPolicy",
    "ScriptedModel",
    "ToolSpec",
    "TransientModelError",
    "reply",
]


def __getattr__(name: str) -> Any:
    if name == "AnthropicModel":
        from thena_nb.models.anthropic import AnthropicModel

        return AnthropicModel
    if name == "OpenAICompatModel":
        from thena_nb.models.openai_compat import OpenAICompatModel

        return OpenAICompatModel
    raise AttributeError(f"module 'thena_nb.models' has no attribute {name!r}")
