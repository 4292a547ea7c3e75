"""Rescue tool calls that a model wrote as text: the public home of `rescue_tool_calls`."""

from thena_nb.core.rescue import rescue_tool_calls

__all__ = ["rescue_tool_calls"]
