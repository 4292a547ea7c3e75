"""Models go to Ray workers pickled: an `AnthropicModel` that already made a call here (so
it holds a live client and a reference to its event loop) and an `OpenAICompatModel` (whose
client holds locks) pickle, and the copies call their servers."""

from __future__ import annotations

import pickle

from chat_completions_server import ChatCompletionsServer, Completion
from messages_api_server import MessagesAPIServer, text

from thena_nb import Agent, Workflow
from thena_nb.models import AnthropicModel, OpenAICompatModel


def test_an_anthropic_model_that_made_a_call_pickles_and_its_copy_calls_again() -> None:
    with MessagesAPIServer() as server:
        server.script(text("here"), text("there"))
        model = AnthropicModel("claude-test", base_url=server.base_url, api_key="sk-test")
        wf = Workflow("w", [Agent("A", model=model)])
        assert wf.run("hi", store=False).output == "here"
        assert model._clients.clients()  # the live client the pickle must leave behind
        copy = pickle.loads(pickle.dumps(wf))
        assert copy.run("hi", store=False).output == "there"
    assert model._clients.clients()  # pickling did not touch the original


def test_an_openai_compat_model_pickles_and_its_copy_calls_its_server() -> None:
    with ChatCompletionsServer([Completion("first"), Completion("second")]) as server:
        model = OpenAICompatModel("m", base_url=server.base_url, api_key="sk-test")
        wf = Workflow("w", [Agent("A", model=model)])
        assert wf.run("hi", store=False).output == "first"
        copy = pickle.loads(pickle.dumps(wf))
        assert copy.run("hi", store=False).output == "second"
        headers = {k.lower(): v for k, v in server.requests[1].headers.items()}
        assert headers["authorization"] == "Bearer sk-test"  # the copy's key is the key
