"""The adapters' turns priced in dollars: `AnthropicModel` and `OpenAICompatModel` through the
real SDKs and the 127.0.0.1 servers, their token counts as the APIs report them, compared with
genai-prices' own price for the same call; a local server's model is never given a hosted
provider's price."""

from __future__ import annotations

import warnings

import pytest
from chat_completions_server import ChatCompletionsServer, Completion
from genai_prices import Usage as PricedUsage
from genai_prices import calc_price
from messages_api_server import MessagesAPIServer, text, tool_use

from thena_nb import Agent, Budget, Workflow, loop, tool, until_answered
from thena_nb.core.records.model import Reply
from thena_nb.cost import UnpricedModelWarning, turn_cost
from thena_nb.models import AnthropicModel, OpenAICompatModel


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def price(provider: str, model: str, **tokens: int) -> float:
    """genai-prices' price of one call (`input_tokens` counts the cached tokens too)."""
    usage = PricedUsage(**tokens)
    return float(calc_price(usage, model, provider_id=provider).total_price)


def one_turn(model: object) -> Workflow:
    return Workflow("w", [Agent("A", model=model)])  # type: ignore[arg-type]


def unpriced(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, UnpricedModelWarning)]


@pytest.mark.parametrize("stream", [False, True])
def test_an_anthropic_turn_costs_its_uncached_and_cached_tokens(
    api_server: MessagesAPIServer, stream: bool
) -> None:
    # The Messages API reports `input_tokens` without the cached ones.
    api_server.script(
        text("hi", input_tokens=1_200, output_tokens=300, cache_read_tokens=500,
             cache_write_tokens=200)
    )  # fmt: skip
    model = AnthropicModel("claude-sonnet-4-0", base_url=api_server.base_url, api_key="k",
                           stream=stream)  # fmt: skip
    run = one_turn(model).run("x", store=False)
    (turn,) = run.turns
    assert (turn.input_tokens, turn.cache_read_tokens, turn.cache_write_tokens) == (1_200, 500, 200)
    expected = price("anthropic", "claude-sonnet-4-0", input_tokens=1_900, output_tokens=300,
                     cache_read_tokens=500, cache_write_tokens=200)  # fmt: skip
    assert turn.cost_usd == expected
    # Claude Sonnet 4 per MTok: $3 input, $15 output, $0.30 cache read, $3.75 cache write.
    assert turn.cost_usd == pytest.approx((1_200 * 3 + 500 * 0.3 + 200 * 3.75 + 300 * 15) / 1e6)
    assert run.cost_usd == expected


def test_an_anthropic_loop_stops_on_its_cost_budget(api_server: MessagesAPIServer) -> None:
    call = tool_use("add", {"a": 1, "b": 1}, input_tokens=1_000, output_tokens=100)
    api_server.script(*[call] * 5)
    model = AnthropicModel("claude-sonnet-4-0", base_url=api_server.base_url, api_key="k")
    calc = Agent("Calc", model=model, tools=[add])
    each = price("anthropic", "claude-sonnet-4-0", input_tokens=1_000, output_tokens=100)
    wf = Workflow("sums", [loop(steps=[calc], until=until_answered)],
                  budget=Budget(max_cost_usd=1.5 * each))  # fmt: skip
    run = wf.run("x", store=False)
    assert run.status == "budget" and run.loops[0].stop_reason == "budget"
    assert len(run.turns) == 2 and api_server.remaining() == 3
    assert run.cost_usd == pytest.approx(2 * each)


def test_an_unknown_anthropic_model_costs_none_with_one_warning(
    api_server: MessagesAPIServer,
) -> None:
    api_server.script(*[text("hi")] * 3)
    model = AnthropicModel("claude-cost-test-unknown", base_url=api_server.base_url, api_key="k")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        runs = [one_turn(model).run("x", store=False) for _ in range(3)]
    assert [r.turns[0].cost_usd for r in runs] == [None] * 3
    assert len(unpriced(caught)) == 1


def test_a_local_server_never_gets_openais_price_for_an_openai_model_name() -> None:
    answers = [Completion("hi", prompt_tokens=1_000, completion_tokens=100)] * 3
    with ChatCompletionsServer(answers) as server:
        model = OpenAICompatModel("gpt-4o", base_url=server.base_url)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            runs = [one_turn(model).run("x", store=False) for _ in range(3)]
    assert [r.turns[0].cost_usd for r in runs] == [None] * 3
    assert all(r.cost_usd is None for r in runs)
    (message,) = unpriced(caught)
    assert "'gpt-4o'" in message and "127.0.0.1" in message


@pytest.mark.parametrize("stream", [False, True])
def test_a_proxy_named_as_openai_costs_openais_price_with_cached_tokens(stream: bool) -> None:
    # Chat completions' `prompt_tokens` already holds the cached tokens.
    answer = Completion("hi", prompt_tokens=1_000, completion_tokens=100, cached_tokens=400)
    with ChatCompletionsServer([answer]) as server:
        model = OpenAICompatModel("gpt-4o", base_url=server.base_url, stream=stream)
        model.provider = "openai"
        run = one_turn(model).run("x", store=False)
    expected = price("openai", "gpt-4o", input_tokens=1_000, output_tokens=100,
                     cache_read_tokens=400)  # fmt: skip
    assert run.turns[0].cost_usd == expected
    # GPT-4o per MTok: $2.50 input, $1.25 cached input, $10 output.
    assert expected == pytest.approx((600 * 2.5 + 400 * 1.25 + 100 * 10) / 1e6)


def test_the_provider_is_found_from_a_hosted_base_url() -> None:
    model = OpenAICompatModel("gpt-4o", base_url="https://api.openai.com/v1", api_key="k")
    tokens = {"input_tokens": 1_000, "output_tokens": 100}
    assert turn_cost(model, Reply(**tokens)) == price("openai", "gpt-4o", **tokens)


def test_an_unpriced_warning_shows_no_secret_of_the_base_url() -> None:
    url = "http://user:s3cret-pw@127.0.0.1:9/v1/sk-path-secret"
    model = OpenAICompatModel("cost-test-url-model", base_url=url, api_key="sk-key-secret")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert turn_cost(model, Reply(input_tokens=5, output_tokens=1)) is None
    (message,) = unpriced(caught)
    assert "http://127.0.0.1:9" in message
    assert "s3cret" not in message and "user" not in message and "sk-" not in message


def test_token_counts_the_price_cannot_take_give_none_with_the_reason() -> None:
    broken = Completion("hi", prompt_tokens=10, completion_tokens=5, cached_tokens=50)
    with ChatCompletionsServer([broken, broken]) as server:
        model = OpenAICompatModel("gpt-4o-mini", base_url=server.base_url)
        model.provider = "openai"
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            runs = [one_turn(model).run("x", store=False) for _ in range(2)]
    assert [r.turns[0].cost_usd for r in runs] == [None, None]
    (message,) = unpriced(caught)
    assert "cannot exceed" in message


def test_an_experiments_anthropic_turns_are_priced_as_the_adapters_own(
    api_server: MessagesAPIServer,
) -> None:
    # An experiment calls models through its rate-limit gate; the price is the adapter's.
    api_server.script(text("hi", input_tokens=1_000, output_tokens=100, cache_read_tokens=400))
    model = AnthropicModel("claude-sonnet-4-0", base_url=api_server.base_url, api_key="k")
    exp = one_turn(model).map(["x"], store=False, progress=False)
    expected = price("anthropic", "claude-sonnet-4-0", input_tokens=1_400, output_tokens=100,
                     cache_read_tokens=400)  # fmt: skip
    assert exp.runs[0].turns[0].cost_usd == expected
    assert exp.frame()["cost_usd"].tolist() == [expected]
    assert exp.compare().loc["base", "cost_usd"] == expected
