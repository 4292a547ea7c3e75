"""What a model call cost in US dollars, priced by genai-prices.

A turn is priced from its model's provider, its model name and its token counts (input,
output, cache read and cache write), with the price data genai-prices ships with: nothing
is fetched from the network (to refresh the prices, upgrade genai-prices, or start its
`UpdatePrices` yourself).

A model is priced when it has a `provider` attribute: a genai-prices provider id (e.g.
`AnthropicModel.provider == "anthropic"`), or `None` to go by its `base_url`, which
genai-prices matches against the APIs of the providers it knows (`https://api.openai.com/v1`
is OpenAI's; a server on this machine is no one's). A model whose price is not known gives
`None`, never a guess, with one `UnpricedModelWarning` per model. A model without the
attribute (ScriptedModel, FunctionModel, a model of your own), or whose `provider` is
`False`, is billed by no one: the core gives its turns `cost_usd=None` without calling this
module.

Example:
    >>> from thena_nb.core.records.model import Reply
    >>> from thena_nb.models import AnthropicModel
    >>> model = AnthropicModel("claude-sonnet-4-0", api_key="k")
    >>> turn_cost(model, Reply(input_tokens=1_000, output_tokens=100))  # $3 and $15 per MTok
    0.0045
"""

from __future__ import annotations

import sys
import warnings
from typing import Any
from urllib.parse import urlsplit

from genai_prices import Usage as _PricedUsage
from genai_prices import calc_price

from thena_nb.core.records.model import Reply

__all__ = ["UnpricedModelWarning", "turn_cost"]


class UnpricedModelWarning(UserWarning):
    """A model's calls cannot be priced, so its turns have `cost_usd=None` (said once per
    model)."""


_Source = tuple[str | None, str | None, str]
"""Where a price is looked up: (provider id, API URL, model name)."""
_UNPRICED: set[_Source] = set()
"""Sources known to have no price: their turns give `None` at once."""
_WARNED: set[str] = set()
"""The model names already warned about: one warning per model."""


def turn_cost(model: Any, reply: Reply) -> float | None:
    """What one model call cost in US dollars, or `None` when no price is known.

    Args:
        model: The model that answered: its `name`, and its `provider` or `base_url`.
        reply: The reply, with the call's token counts.

    Returns:
        The price genai-prices gives for the call's tokens, as a float.
    """
    source = _source(model)
    if source in _UNPRICED:
        return None
    provider, url, name = source
    try:
        usage = _usage(model, reply)
        if provider is not None:
            price = calc_price(usage, name, provider_id=provider)
        else:
            price = calc_price(usage, name, provider_api_url=url)
    except Exception as exc:  # a price that cannot be had never fails the run
        _unpriced(source, exc)
        return None
    return float(price.total_price)


def _source(model: Any) -> _Source:
    provider = getattr(model, "provider", None)
    provider = None if provider is None or provider is False else provider
    url = None if provider is not None else getattr(model, "base_url", None)
    return (
        None if provider is None else str(provider),
        None if url is None else str(url),
        str(getattr(model, "name", "")),
    )


def _usage(model: Any, reply: Reply) -> _PricedUsage:
    """The call's tokens as genai-prices counts them: `input_tokens` includes the cached
    ones. The Messages API reports them apart (its `input_tokens` is the uncached rest);
    chat completions' `prompt_tokens` already holds them."""
    cached = reply.cache_read_tokens + reply.cache_write_tokens
    anthropic = sys.modules.get("thena_nb.models.anthropic")  # loaded if `model` is one
    apart = anthropic is not None and isinstance(_unwrapped(model), anthropic.AnthropicModel)
    return _PricedUsage(
        input_tokens=reply.input_tokens + (cached if apart else 0),
        output_tokens=reply.output_tokens,
        cache_read_tokens=reply.cache_read_tokens,
        cache_write_tokens=reply.cache_write_tokens,
    )


def _unwrapped(model: Any) -> Any:
    """The adapter behind a model that wraps another as its `model` (an experiment's
    rate-limit gate does)."""
    inner = getattr(model, "__dict__", {}).get("model")
    while inner is not None and hasattr(inner, "respond"):
        model = inner
        inner = getattr(model, "__dict__", {}).get("model")
    return model


def _unpriced(source: _Source, exc: Exception) -> None:
    provider, url, name = source
    if isinstance(exc, LookupError):
        _UNPRICED.add(source)  # the price data does not change while the process runs
        why = "genai-prices does not know it"  # its message may hold the URL: not shown
    else:
        why = f"{type(exc).__name__}: {exc}"  # e.g. token counts the price cannot take
        if url:
            why = why.replace(url, _host(url))
    if name in _WARNED:
        return
    _WARNED.add(name)
    if provider is not None:
        where, hint = f"provider {provider!r}", ""
    else:
        where = f"at {_host(url)}"
        hint = (
            " When a proxy serves a provider's model, set the model's `provider` to that "
            "provider's genai-prices id, e.g. `model.provider = 'openai'`."
        )
    warnings.warn(
        f"no price is known for model {name!r} ({where}): its turns have cost_usd=None "
        f"({why}).{hint}",
        UnpricedModelWarning,
        stacklevel=2,
    )


def _host(url: str | None) -> str:
    """The scheme, host and port of an API URL: no path, user or password."""
    if not url:
        return "no base_url"
    try:
        parts = urlsplit(url)
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "an unreadable base_url"
    return f"{parts.scheme}://{parts.hostname}{port}" if parts.hostname else "an unknown host"
