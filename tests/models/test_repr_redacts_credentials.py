"""An adapter's repr never shows the credentials of its `base_url`: user info and the values
of secret-looking query parameters are `***` (`core/records/_secrets.py` `redact_url`), in the
adapter's repr and in every repr that holds it (agent, workflow)."""

from __future__ import annotations

from typing import Any

import pytest

from thena_nb import Agent, Workflow
from thena_nb.core.records._secrets import redact_url
from thena_nb.models import AnthropicModel, OpenAICompatModel

KEY = "sk-ant-in-the-url-8c2d7f1e4a"
URL = f"https://user:{KEY}@proxy.example.com/v1/?key={KEY}&region=eu"
SHOWN = "https://***@proxy.example.com/v1/?key=***&region=eu"


def _adapters() -> list[Any]:
    return [
        AnthropicModel("claude-test", base_url=URL, api_key="sk-ant-unused-11111111"),
        OpenAICompatModel("qwen-test", base_url=URL, api_key="unused-key-22222222"),
    ]


@pytest.mark.parametrize("model", _adapters(), ids=["anthropic", "openai_compat"])
def test_adapter_repr_redacts_base_url_credentials(model: Any) -> None:
    shown = repr(model)
    assert KEY not in shown and "user:" not in shown
    assert f"base_url={SHOWN!r}" in shown
    wf = Workflow("w", [Agent("A", model=model)])
    for text in (repr(wf.steps[0]), repr(wf), wf._repr_html_()):
        assert KEY not in text


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://api.anthropic.com", "https://api.anthropic.com"),
        ("http://localhost:11434/v1?debug=1", "http://localhost:11434/v1?debug=1"),
        (f"https://{KEY}@host/v1", "https://***@host/v1"),
        (
            "https://h/v1?api_key=abc&access_token=def&sig=ghi",
            "https://h/v1?api_key=***&access_token=***&sig=***",
        ),
        ("https://h/v1?Token=abc#frag", "https://h/v1?Token=***#frag"),
        (f"https://h/{KEY}/v1", "https://h/***/v1"),
    ],
)
def test_redact_url_keeps_the_address_and_hides_credentials(url: str, shown: str) -> None:
    assert redact_url(url) == shown
