"""A table-driven corpus of model texts: tool calls written as text in every supported format,
and texts that look like calls but are not; and a second corpus transcribed from the peers'
tool-parser tests (`peer_cases.py`). Run with `-s` to see per-format precision and recall."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Literal

import pytest
from peer_cases import DIVERGENCES, PEER_CORPUS, PeerCase

from thena_nb.core.parts.tools import Tool, tool
from thena_nb.core.records.model import ToolSpec
from thena_nb.core.rescue import RescueScan, scan_tool_calls
from thena_nb.rescue import rescue_tool_calls


@tool
def get_weather(city: str, unit: Literal["celsius", "fahrenheit"] = "celsius") -> str:
    """Current weather for a city."""
    return f"sunny in {city}"


@tool
def search(query: str, limit: int = 5) -> str:
    """Search the web."""
    return query


@tool
def get_time() -> str:
    """The current time."""
    return "12:00"


@tool
def run_commands(commands: list[str], cwd: str = ".") -> str:
    """Run shell commands."""
    return "ok"


@tool
def set_timer(seconds: int, label: str | None = None, loud: bool = False) -> str:
    """Set a timer."""
    return "set"


@tool(rescue=False)
def send_mail(to: str, body: str) -> str:
    """Send an email."""
    return "sent"


lookup_stock = ToolSpec(
    name="lookup_stock",
    description="Latest price of a stock.",
    parameters={
        "type": "object",
        "properties": {"symbol": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["symbol"],
        "additionalProperties": False,
    },
)

TOOLS: list[Tool | ToolSpec] = [
    get_weather,
    search,
    get_time,
    run_commands,
    set_timer,
    send_mail,
    lookup_stock,
]

Call = tuple[str, dict[str, Any]]
LISBON: Call = ("get_weather", {"city": "Lisbon"})
PARIS_F: Call = ("get_weather", {"city": "Paris", "unit": "fahrenheit"})
SEARCH: Call = ("search", {"query": "python asyncio"})
THINK = "<think>The user wants the weather. I should call get_weather for Lisbon.</think>\n"


@dataclass(frozen=True)
class Case:
    """One corpus entry: a model text and the calls it should yield (none for a negative)."""

    id: str
    fmt: str
    text: str
    calls: list[Call] = field(default_factory=list)
    source: str = ""
    """Where the shape is documented (see /work/shared/research/rescue_formats.md): a parser,
    a prompt or an issue, as `owner/repo path` or `owner/repo#N`."""


def c(id: str, fmt: str, text: str, *calls: Call, source: str = "") -> Case:
    return Case(id, fmt, text, list(calls), source)


LANGCHAIN_REACT = (
    "langchain-ai/langchain libs/langchain/langchain/agents/output_parsers/react_single_input.py"
)
LLAMA_INDEX_REACT = "run-llama/llama_index llama_index/agent/react/output_parser.py"
ANTHROPIC_LEGACY = (
    "rescue_formats.md anthropic_xml (Claude prompt-based tool use, legacy 2023 form)"
)
GLM45 = "vllm-project/vllm vllm/entrypoints/openai/tool_parsers/glm4_moe_tool_parser.py"
TRANSCRIPT = "jundot/omlx#1153, NousResearch/hermes-agent#27834"
INLINE = "rescue_formats.md §3.6 (illustrations never count); ggml-org/llama.cpp#18183"


W = '{"name": "get_weather", "arguments": {"city": "Lisbon"}}'

CORPUS: list[Case] = [
    # -- bare JSON ------------------------------------------------------------------------
    c("bare-arguments", "bare_json", W, LISBON),
    c(
        "bare-parameters",
        "bare_json",
        '{"name": "get_weather", "parameters": {"city": "Lisbon"}}',
        LISBON,
    ),
    c(
        "bare-input",
        "bare_json",
        '{"name": "search", "input": {"query": "python asyncio"}}',
        SEARCH,
    ),
    c(
        "bare-tool-input",
        "bare_json",
        '{"tool": "search", "tool_input": {"query": "python asyncio"}}',
        SEARCH,
    ),
    c(
        "bare-python-tag",
        "bare_json",
        '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Lisbon"}}<|eom_id|>',
        LISBON,
    ),
    c(
        "bare-list",
        "bare_json",
        '[{"name": "get_weather", "arguments": {"city": "Lisbon"}}, {"name": "search", "arguments": {"query": "python asyncio"}}]',
        LISBON,
        SEARCH,
    ),
    c("bare-flattened", "bare_json", '{"name": "get_weather", "city": "Lisbon"}', LISBON),
    c("bare-no-args", "bare_json", '{"name": "get_time", "arguments": {}}', ("get_time", {})),
    c(
        "bare-toolspec",
        "bare_json",
        '{"name": "lookup_stock", "arguments": {"symbol": "AAPL", "days": 5}}',
        ("lookup_stock", {"symbol": "AAPL", "days": 5}),
    ),
    c(
        "bare-semicolons",
        "bare_json",
        '{"name": "get_weather", "parameters": {"city": "Lisbon"}}; {"name": "search", "parameters": {"query": "python asyncio"}}',
        LISBON,
        SEARCH,
    ),
    c(
        "neg-bare-unknown-tool",
        "bare_json",
        '{"name": "execute_python", "arguments": {"code": "print(1)"}}',
    ),
    c(
        "neg-bare-records",
        "bare_json",
        'The team: [{"name": "search", "role": "lead"}, {"name": "Ana", "role": "dev"}]',
    ),
    c(
        "neg-bare-invalid-args",
        "bare_json",
        '{"name": "get_weather", "arguments": {"town": "Lisbon"}}',
    ),
    c(
        "neg-bare-bad-enum",
        "bare_json",
        '{"name": "get_weather", "arguments": {"city": "Lisbon", "unit": "kelvin"}}',
    ),
    c(
        "neg-bare-toolspec-extra",
        "bare_json",
        '{"name": "lookup_stock", "arguments": {"symbol": "AAPL", "exchange": "NYSE"}}',
    ),
    c(
        "neg-bare-definition",
        "bare_json",
        'My tools: {"name": "get_weather", "description": "Weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}',
    ),
    # -- OpenAI shape -------------------------------------------------------------------------
    c(
        "openai-function",
        "openai_shape",
        '{"type": "function", "function": {"name": "get_weather", "arguments": "{\\"city\\": \\"Lisbon\\"}"}}',
        LISBON,
    ),
    c(
        "openai-tool-calls",
        "openai_shape",
        '{"tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "search", "arguments": "{\\"query\\": \\"python asyncio\\"}"}}]}',
        SEARCH,
    ),
    c(
        "openai-function-call",
        "openai_shape",
        '{"function_call": {"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\", \\"unit\\": \\"fahrenheit\\"}"}}',
        PARIS_F,
    ),
    c(
        "openai-generic-tool-call",
        "openai_shape",
        '{"tool_call": {"name": "get_weather", "arguments": {"city": "Lisbon"}}}',
        LISBON,
    ),
    c(
        "neg-openai-definition",
        "openai_shape",
        '{"type": "function", "function": {"name": "get_weather", "description": "Weather for a city", "parameters": {"type": "object"}}}',
    ),
    # -- action JSON --------------------------------------------------------------------------
    c(
        "action-json",
        "action_json",
        '{"action": "search", "action_input": {"query": "python asyncio"}}',
        SEARCH,
    ),
    c(
        "action-json-string",
        "action_json",
        '{"action": "search", "action_input": "python asyncio"}',
        SEARCH,
    ),
    c(
        "action-smolagents",
        "action_json",
        'Action:\n{\n  "name": "get_weather",\n  "arguments": {"city": "Lisbon"}\n}',
        LISBON,
    ),
    # -- fences -------------------------------------------------------------------------------
    c("fence-json", "json_fence", f"Let me check.\n```json\n{W}\n```", LISBON),
    c("fence-plain", "json_fence", f"```\n{W}\n```", LISBON),
    c("fence-tool-call", "json_fence", f"```tool_call\n{W}\n```", LISBON),
    c(
        "fence-list",
        "json_fence",
        '```json\n[\n  {"name": "get_weather", "arguments": {"city": "Lisbon"}},\n  {"name": "search", "arguments": {"query": "python asyncio"}}\n]\n```',
        LISBON,
        SEARCH,
    ),
    c(
        "fence-tool-code",
        "json_fence",
        '```tool_code\nprint(default_api.get_weather(city="Lisbon"))\n```',
        LISBON,
    ),
    c(
        "neg-fence-example",
        "json_fence",
        f"Sure! Here is an example of a tool call in JSON:\n```json\n{W}\n```",
    ),
    c(
        "neg-fence-python",
        "json_fence",
        f"Use it from Python:\n```python\ncall = {W}\nclient.send(call)\n```",
    ),
    c(
        "neg-fence-package",
        "json_fence",
        '```json\n{"name": "search", "version": "1.0.0", "main": "index.js"}\n```',
    ),
    c("neg-fence-bash", "json_fence", "```bash\ncurl -d '" + W + "' localhost\n```"),
    # -- Hermes / Qwen ------------------------------------------------------------------------
    c("hermes", "hermes", f"<tool_call>\n{W}\n</tool_call>", LISBON),
    c("hermes-after-think", "hermes", f"{THINK}<tool_call>\n{W}\n</tool_call>", LISBON),
    c(
        "hermes-two",
        "hermes",
        f'<tool_call>\n{W}\n</tool_call>\n<tool_call>\n{{"name": "search", "arguments": {{"query": "python asyncio"}}}}\n</tool_call>',
        LISBON,
        SEARCH,
    ),
    c("hermes-no-close", "hermes", f"<tool_call>\n{W}", LISBON),
    c(
        "hermes-string-args",
        "hermes",
        '<tool_call>\n{"name": "get_weather", "arguments": "{\\n  \\"city\\": \\"Lisbon\\"\\n}"}\n</tool_call>',
        LISBON,
    ),
    c("hermes-list", "hermes", f"<tool_call>[{W}]</tool_call>", LISBON),
    c(
        "hermes-prose",
        "hermes",
        f"I'll look up the weather for you.\n\n<tool_call>\n{W}\n</tool_call>\n\nOne moment.",
        LISBON,
    ),
    c("hermes-name-only", "hermes", "<tool_call>get_time</tool_call>", ("get_time", {})),
    c(
        "minimax-wrapper",
        "hermes",
        '<minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="city">Lisbon</parameter>\n</invoke>\n</minimax:tool_call>',
        LISBON,
    ),
    c(
        "glm",
        "hermes",
        "<tool_call>set_timer\n<arg_key>seconds</arg_key>\n<arg_value>300</arg_value>\n</tool_call>",
        ("set_timer", {"seconds": 300}),
    ),
    c(
        "neg-hermes-in-think",
        "hermes",
        f"<think>Maybe:\n<tool_call>\n{W}\n</tool_call>\nNo, the user only said hello.</think>\nHello! How can I help?",
    ),
    c(
        "neg-hermes-truncated",
        "hermes",
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Lis',
    ),
    c("neg-hermes-unclosed-think", "hermes", f"<think>Let me draft: <tool_call>{W}</tool_call>"),
    # -- Llama function tag -------------------------------------------------------------------
    c(
        "llama-function",
        "llama_function_tag",
        '<function=get_weather>{"city": "Lisbon"}</function>',
        LISBON,
    ),
    c(
        "llama-function-two",
        "llama_function_tag",
        '<function=get_weather>{"city": "Lisbon"}</function>\n<function=search>{"query": "python asyncio"}</function>',
        LISBON,
        SEARCH,
    ),
    c(
        "llama-function-prose",
        "llama_function_tag",
        'Checking now. <function=search>{"query": "python asyncio", "limit": 3}</function>',
        ("search", {"query": "python asyncio", "limit": 3}),
    ),
    c(
        "neg-llama-function-unknown",
        "llama_function_tag",
        '<function=browser.search>{"query": "python asyncio"}</function>',
    ),
    # -- pythonic -----------------------------------------------------------------------------
    c("pythonic", "pythonic", '[get_weather(city="Lisbon")]', LISBON),
    c(
        "pythonic-two",
        "pythonic",
        "[get_weather(city='Paris', unit='fahrenheit'), search(query='python asyncio')]",
        PARIS_F,
        SEARCH,
    ),
    c(
        "pythonic-llama4",
        "pythonic",
        '<|python_start|>[get_weather(city="Lisbon")]<|python_end|>',
        LISBON,
    ),
    c(
        "pythonic-literals",
        "pythonic",
        "[set_timer(seconds=90, label=None, loud=True)]",
        ("set_timer", {"seconds": 90, "label": None, "loud": True}),
    ),
    c(
        "pythonic-olmo",
        "pythonic",
        '<function_calls>\nget_weather(city="Lisbon")\nsearch(query="python asyncio")\n</function_calls>',
        LISBON,
        SEARCH,
    ),
    c("pythonic-positional", "pythonic", '[get_weather("Lisbon")]', LISBON),
    c("neg-pythonic-placeholder", "pythonic", "I would call `search(query=...)` to find that."),
    c("neg-pythonic-ellipsis-list", "pythonic", "[search(query=...)]"),
    c("neg-pythonic-code", "pythonic", "[get_weather(city=os.environ['CITY'])]"),
    c("neg-pythonic-inline", "pythonic", 'You can run get_weather(city="Lisbon") yourself.'),
    # -- Mistral ------------------------------------------------------------------------------
    c("mistral-list", "mistral", f"[TOOL_CALLS] [{W}]", LISBON),
    c("mistral-v11", "mistral", '[TOOL_CALLS]get_weather[ARGS]{"city": "Lisbon"}', LISBON),
    c(
        "mistral-v11-two",
        "mistral",
        '[TOOL_CALLS]get_weather[ARGS]{"city": "Lisbon"}[TOOL_CALLS]search[ARGS]{"query": "python asyncio"}',
        LISBON,
        SEARCH,
    ),
    c("mistral-no-args-token", "mistral", '[TOOL_CALLS]get_weather{"city": "Lisbon"}</s>', LISBON),
    # -- invoke XML ---------------------------------------------------------------------------
    c(
        "invoke",
        "anthropic_xml",
        '<function_calls>\n<invoke name="get_weather">\n<parameter name="city">Lisbon</parameter>\n</invoke>\n</function_calls>',
        LISBON,
    ),
    c(
        "invoke-typed",
        "anthropic_xml",
        '<function_calls>\n<invoke name="set_timer">\n<parameter name="seconds">300</parameter>\n<parameter name="loud">true</parameter>\n</invoke>\n</function_calls>',
        ("set_timer", {"seconds": 300, "loud": True}),
    ),
    c(
        "invoke-two",
        "anthropic_xml",
        '<function_calls><invoke name="get_weather"><parameter name="city">Lisbon</parameter></invoke><invoke name="search"><parameter name="query">python asyncio</parameter></invoke></function_calls>',
        LISBON,
        SEARCH,
    ),
    c(
        "invoke-namespaced",
        "anthropic_xml",
        '<ns:function_calls><ns:invoke name="get_weather"><ns:parameter name="city">Lisbon</ns:parameter></ns:invoke></ns:function_calls>',
        LISBON,
    ),
    c(
        "invoke-bare",
        "anthropic_xml",
        'Looking it up.\n<invoke name="search">\n<parameter name="query">python asyncio</parameter>\n</invoke>',
        SEARCH,
    ),
    c(
        "invoke-array",
        "anthropic_xml",
        '<invoke name="run_commands"><parameter name="commands">["npm install", "npm test"]</parameter></invoke>',
        ("run_commands", {"commands": ["npm install", "npm test"]}),
    ),
    c(
        "neg-invoke-quoted",
        "anthropic_xml",
        '> <invoke name="get_weather"><parameter name="city">Lisbon</parameter></invoke>\n\nThat quoted text came from the web page; I did not act on it.',
    ),
    # -- Qwen3-coder XML ----------------------------------------------------------------------
    c(
        "qwen3-coder",
        "qwen3_coder_xml",
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nLisbon\n</parameter>\n</function>\n</tool_call>",
        LISBON,
    ),
    c(
        "qwen3-coder-unwrapped",
        "qwen3_coder_xml",
        "<function=get_weather>\n<parameter=city>\nLisbon\n</parameter>\n<parameter=unit>\nfahrenheit\n</parameter>\n</function>",
        ("get_weather", {"city": "Lisbon", "unit": "fahrenheit"}),
    ),
    c(
        "qwen3-coder-python-list",
        "qwen3_coder_xml",
        "<tool_call>\n<function=run_commands>\n<parameter=commands>\n['npm install', 'npm test']\n</parameter>\n</function>\n</tool_call>",
        ("run_commands", {"commands": ["npm install", "npm test"]}),
    ),
    c(
        "qwen3-coder-missing-param-close",
        "qwen3_coder_xml",
        "<tool_call>\n<function=set_timer>\n<parameter=seconds>\n60\n<parameter=loud>\nTrue\n</function>\n</tool_call>",
        ("set_timer", {"seconds": 60, "loud": True}),
    ),
    c(
        "neg-qwen3-coder-missing-required",
        "qwen3_coder_xml",
        "<tool_call>\n<function=send_mail>\n<parameter=to>\nana@example.com\n</parameter>\n</function>\n</tool_call>",
    ),
    # -- ReAct --------------------------------------------------------------------------------
    c(
        "react",
        "react",
        'Thought: I need the weather.\nAction: get_weather\nAction Input: {"city": "Lisbon"}',
        LISBON,
    ),
    c(
        "react-string",
        "react",
        "Thought: search it.\nAction: search\nAction Input: python asyncio",
        SEARCH,
    ),
    c(
        "react-invented-observation",
        "react",
        'Thought: I need the weather.\nAction: get_weather\nAction Input: {"city": "Lisbon"}\nObservation: sunny\nThought: now search\nAction: search\nAction Input: python asyncio',
        LISBON,
    ),
    c(
        "react-json-blob",
        "react",
        'Thought: search.\nAction:\n```json\n{"action": "search", "action_input": {"query": "python asyncio"}}\n```',
        SEARCH,
    ),
    c(
        "neg-react-final-answer",
        "react",
        "Thought: I know this.\nAction: get_weather\nAction Input: Lisbon\nObservation: sunny\nThought: done\nFinal Answer: It is sunny in Lisbon.",
    ),
    # -- DeepSeek -----------------------------------------------------------------------------
    c(
        "deepseek-v3",
        "deepseek",
        '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{"city": "Lisbon"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
        LISBON,
    ),
    c(
        "deepseek-v31",
        "deepseek",
        '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city": "Lisbon"}<｜tool▁call▁end｜><｜tool▁call▁begin｜>search<｜tool▁sep｜>{"query": "python asyncio"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
        LISBON,
        SEARCH,
    ),
    c(
        "deepseek-mangled",
        "deepseek",
        '<｜tool_calls_begin｜><｜tool_call_begin｜>get_weather<｜tool_sep｜>{"city": "Lisbon"}<｜tool_call_end｜><｜tool_calls_end｜>',
        LISBON,
    ),
    c(
        "neg-deepseek-truncated",
        "deepseek",
        '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city": "Lis',
    ),
    # -- Kimi ---------------------------------------------------------------------------------
    c(
        "kimi",
        "kimi",
        '<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{"city": "Lisbon"}<|tool_call_end|><|tool_calls_section_end|>',
        LISBON,
    ),
    c(
        "kimi-two",
        "kimi",
        'Let me check both.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{"city": "Lisbon"}<|tool_call_end|><|tool_call_begin|>functions.search:1<|tool_call_argument_begin|>{"query": "python asyncio"}<|tool_call_end|><|tool_calls_section_end|>',
        LISBON,
        SEARCH,
    ),
    c(
        "neg-kimi-unknown",
        "kimi",
        '<|tool_calls_section_begin|><|tool_call_begin|>functions.web.answer:0<|tool_call_argument_begin|>{"text": "hi"}<|tool_call_end|><|tool_calls_section_end|>',
    ),
    # -- repair -------------------------------------------------------------------------------
    c(
        "repair-single-quotes",
        "repair",
        "{'name': 'get_weather', 'arguments': {'city': 'Lisbon'}}",
        LISBON,
    ),
    c(
        "repair-trailing-commas",
        "repair",
        '{"tool": "set_timer", "tool_input": {"seconds": 300,},}',
        ("set_timer", {"seconds": 300}),
    ),
    c(
        "repair-python-literals",
        "repair",
        '{"name": "set_timer", "arguments": {"seconds": 5, "label": None, "loud": True}}',
        ("set_timer", {"seconds": 5, "label": None, "loud": True}),
    ),
    c(
        "repair-missing-brace",
        "repair",
        'Checking.\n{"name": "get_weather", "arguments": {"city": "Lisbon"}',
        LISBON,
    ),
    c(
        "repair-apostrophe",
        "repair",
        '{"name": "search", "arguments": {"query": "what\'s new in python"}}',
        ("search", {"query": "what's new in python"}),
    ),
    c(
        "repair-single-quotes-apostrophe",
        "repair",
        """{'name': 'search', 'arguments': {'query': "what's new"}}""",
        ("search", {"query": "what's new"}),
    ),
    c(
        "repair-unicode-escape",
        "repair",
        '{"name": "get_weather", "arguments": {"city": "Lisb\\u00f3a"}}',
        ("get_weather", {"city": "Lisbóa"}),
    ),
    c(
        "repair-missing-comma",
        "repair",
        '{"name": "search" "arguments": {"query": "python asyncio"}}',
        SEARCH,
    ),
    c(
        "repair-literals-missing-brace",
        "repair",
        '{"name": "set_timer", "arguments": {"seconds": 5, "loud": True}',
        ("set_timer", {"seconds": 5, "loud": True}),
    ),
    c(
        "repair-raw-newline",
        "repair",
        '{"name": "search", "arguments": {"query": "line one\nline two"}}',
        ("search", {"query": "line one\nline two"}),
    ),
    c(
        "neg-repair-unquoted-value",
        "repair",
        '{"name": "get_weather", "arguments": {"city": Lisbon}}',
    ),
    c(
        "neg-repair-truncated-list",
        "repair",
        '{"name": "run_commands", "arguments": {"commands": ["npm install", "npm test"',
    ),
    c("neg-repair-cut-value", "repair", '{"name": "get_weather", "arguments": {"city": "Lis'),
    c("neg-repair-cut-before-args", "repair", '{"name": "get_weather", "arguments": '),
    # -- several calls, prose -----------------------------------------------------------------
    c(
        "mixed-known-unknown",
        "multi",
        '<tool_call>{"name": "browser.search", "arguments": {"query": "x"}}</tool_call>\n<tool_call>'
        + W
        + "</tool_call>",
        LISBON,
    ),
    c(
        "multi-formats",
        "multi",
        f'First the weather:\n<tool_call>{W}</tool_call>\nand then [search(query="python asyncio")]',
        LISBON,
        SEARCH,
    ),
    c(
        "prose-around",
        "prose",
        f"Sure, I'll check the forecast for Lisbon now.\n{W}\nI'll report back shortly.",
        LISBON,
    ),
    # -- safety: things that are not calls ----------------------------------------------------
    c(
        "neg-plain-prose",
        "negative",
        "The weather in Lisbon is usually mild; try a search for details.",
    ),
    c(
        "neg-refusal",
        "negative",
        "I'm sorry, but I can't use send_mail or get_weather for that request.",
    ),
    c(
        "neg-refusal-with-call",
        "negative",
        f"I won't run that for you, but the call would be:\n{W}",
    ),
    c(
        "neg-placeholder-angle",
        "negative",
        '{"name": "get_weather", "arguments": {"city": "<city name>"}}',
    ),
    c(
        "neg-placeholder-caps",
        "negative",
        '<tool_call>{"name": "get_weather", "arguments": {"city": "CITY"}}</tool_call>',
    ),
    c("neg-placeholder-type", "negative", '{"name": "search", "arguments": {"query": "string"}}'),
    c(
        "neg-template",
        "negative",
        'Reply in this format: {"name": "TOOL_NAME", "arguments": {"city": "..."}}',
    ),
    c("neg-past-narration", "negative", f"Earlier I called {W} and it said sunny."),
    c(
        "neg-user-json",
        "negative",
        'Here is the JSON you asked for:\n```json\n{"name": "Lisbon", "population": 545000}\n```',
    ),
    c(
        "neg-example-hermes",
        "negative",
        f"For example, a tool call looks like this: <tool_call>{W}</tool_call>",
    ),
    c("neg-only-in-think", "negative", f"<think>{W}</think>The answer is 42."),
    c("neg-closing-think-only", "negative", f"{W}\nhmm, no.</think>\nIt is 42."),
    c("neg-empty", "negative", ""),
    c("neg-brackets", "negative", "See [1] and [2]: {this is not json} and [also not]."),
    # -- formats read since issue 18 ------------------------------------------------------
    c(
        "harmony",
        "harmony",
        "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>"
        'commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Lisbon"}'
        "<|call|>",
        LISBON,
    ),
    c(
        "harmony-plain-input",
        "harmony",
        "<|channel|>commentary to=functions.search<|message|>python asyncio<|call|>",
        SEARCH,
    ),
    c(
        "harmony-glued-json",
        "harmony",
        '<|channel|>commentary to=functions.get_weatherjson<|message|>{"city": "Lisbon"}<|call|>',
        LISBON,
    ),
    c(
        "neg-harmony-analysis-only",
        "harmony",
        '<|channel|>analysis<|message|>I could call get_weather with {"city": "Lisbon"}.<|end|>'
        "<|start|>assistant<|channel|>final<|message|>It is usually mild in Lisbon.",
    ),
    c(
        "neg-harmony-cut",
        "harmony",
        '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Lis',
    ),
    c(
        "neg-harmony-quoted-in-prose",
        "harmony",
        "In gpt-oss output a call looks like `<|channel|>commentary to=functions.get_weather"
        '<|message|>{"city": "Lisbon"}<|call|>`.',
    ),
    c("gemma", "gemma", '<|tool_call>call:get_weather{city:<|"|>Lisbon<|"|>}<tool_call|>', LISBON),
    c(
        "gemma-thought",
        "gemma",
        "<|channel>thought\nThe user wants Lisbon.<channel|>"
        '<|tool_call>call:get_weather{city:<|"|>Lisbon<|"|>}<tool_call|>',
        LISBON,
    ),
    c(
        "neg-gemma-example",
        "gemma",
        'For example, a Gemma call looks like <|tool_call>call:get_weather{city:<|"|>Lisbon<|"|>}'
        "<tool_call|>",
    ),
    c("neg-gemma-unquoted", "gemma", "<|tool_call>call:get_weather{city:Lisbon}<tool_call|>"),
    c(
        "function-gemma",
        "gemma",
        "<start_function_call>call:get_weather{city:<escape>Lisbon<escape>}<end_function_call>",
        LISBON,
    ),
    c(
        "dsml",
        "dsml",
        '<｜DSML｜function_calls>\n<｜DSML｜invoke name="set_timer">\n'
        '<｜DSML｜parameter name="seconds" string="false">90</｜DSML｜parameter>\n'
        "</｜DSML｜invoke>\n</｜DSML｜function_calls>",
        ("set_timer", {"seconds": 90}),
    ),
    c(
        "dsml-json-body",
        "dsml",
        '<｜DSML｜function_calls><｜DSML｜invoke name="get_weather">{"city": "Lisbon"}'
        "</｜DSML｜invoke></｜DSML｜function_calls>",
        LISBON,
    ),
    c(
        "step3",
        "step3",
        '<｜tool_calls_begin｜><｜tool_call_begin｜><steptml:invoke name="get_weather">'
        '<steptml:parameter name="city">Lisbon</steptml:parameter></steptml:invoke>'
        "<｜tool_call_end｜><｜tool_calls_end｜>",
        LISBON,
    ),
    c(
        "apertus",
        "apertus",
        '<|tools_prefix|>[{"get_weather": {"city": "Lisbon"}}]<|tools_suffix|>',
        LISBON,
    ),
    c("apertus-bare-alone", "apertus", '{"get_weather": {"city": "Lisbon"}}', LISBON),
    c(
        "neg-apertus-bare-in-prose",
        "apertus",
        'The cache holds {"get_weather": {"city": "Lisbon"}} from yesterday.',
    ),
    c("neg-apertus-data", "apertus", '{"search": {"hits": 3, "took_ms": 12}}'),
    c(
        "llama-builtin",
        "llama_builtin",
        '<|python_tag|>search.call(query="python asyncio")',
        SEARCH,
    ),
    c("functionary", "functionary", '>>>get_weather\n{"city": "Lisbon"}', LISBON),
    c(
        "functionary-after-text",
        "functionary",
        'all\nChecking the weather.>>>get_weather\n{"city": "Lisbon"}',
        LISBON,
    ),
    c("neg-functionary-all", "functionary", ">>>all\nget_weather is a tool I have."),
    c(
        "seed-think",
        "seed",
        "<seed:think>I have used 40 tokens. I called get_weather before.</seed:think>\n"
        "<seed:tool_call>\n<function=get_weather>\n<parameter=city>Lisbon</parameter>\n"
        "</function>\n</seed:tool_call>",
        LISBON,
    ),
    c(
        "deepseek-r1-opener",
        "deepseek",
        '<｜tool▁calls｜>function<｜tool▁sep｜>get_weather\n```json\n{"city": "Lisbon"}\n```'
        "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
        LISBON,
    ),
    c(
        "cohere-action",
        "cohere",
        '<|START_ACTION|>[{"tool_call_id": "0", "tool_name": "search", "parameters": '
        '{"query": "python asyncio"}}]<|END_ACTION|>',
        SEARCH,
    ),
    # -- still missed or mistaken in issue 19 -------------------------------------------------
    c(
        "react-input-next-line",
        "react",
        'Thought: I need the weather.\nAction: get_weather\nAction Input:\n{\n  "city": "Lisbon"\n}'
        "\nObservation:",
        LISBON,
        source=LLAMA_INDEX_REACT,
    ),
    c(
        "react-name-next-line",
        "react",
        'Thought:\nI need the weather.\n\nAction:\nget_weather\n\nAction Input:\n{"city": "Lisbon"}',
        LISBON,
        source=LANGCHAIN_REACT,
    ),
    c(
        "react-input-lowercase",
        "react",
        'Thought: search it.\nAction: search\nAction input:\n{"query": "python asyncio"}',
        SEARCH,
        source=LANGCHAIN_REACT,
    ),
    c(
        "neg-react-input-next-line-cut",
        "react",
        'Thought: I need the weather.\nAction: get_weather\nAction Input:\n{"city": "Lis',
        source=LLAMA_INDEX_REACT,
    ),
    c(
        "invoke-legacy",
        "anthropic_xml",
        "<function_calls>\n<invoke>\n<tool_name>get_weather</tool_name>\n<parameters>\n"
        "<city>Lisbon</city>\n</parameters>\n</invoke>\n</function_calls>",
        LISBON,
        source=ANTHROPIC_LEGACY,
    ),
    c(
        "invoke-legacy-typed-bare",
        "anthropic_xml",
        "Setting it now.\n<invoke><tool_name>set_timer</tool_name><parameters>"
        "<seconds>300</seconds><loud>true</loud></parameters></invoke>",
        ("set_timer", {"seconds": 300, "loud": True}),
        source=ANTHROPIC_LEGACY,
    ),
    c(
        "invoke-legacy-two",
        "anthropic_xml",
        "<function_calls><invoke><tool_name>get_weather</tool_name><parameters><city>Lisbon"
        "</city></parameters></invoke><invoke><tool_name>search</tool_name><parameters>"
        "<query>python asyncio</query></parameters></invoke></function_calls>",
        LISBON,
        SEARCH,
        source=ANTHROPIC_LEGACY,
    ),
    c(
        "invoke-legacy-no-parameters",
        "anthropic_xml",
        "<function_calls><invoke><tool_name>get_time</tool_name></invoke></function_calls>",
        ("get_time", {}),
        source=ANTHROPIC_LEGACY,
    ),
    c(
        "neg-invoke-legacy-unknown",
        "anthropic_xml",
        "<function_calls><invoke><tool_name>browser.search</tool_name><parameters><query>x"
        "</query></parameters></invoke></function_calls>",
        source=ANTHROPIC_LEGACY,
    ),
    c(
        "neg-invoke-legacy-cut",
        "anthropic_xml",
        "<function_calls><invoke><tool_name>get_weather</tool_name><parameters><city>Lis",
        source=ANTHROPIC_LEGACY,
    ),
    c(
        "neg-invoke-legacy-example",
        "anthropic_xml",
        "For example, a call looks like <invoke><tool_name>get_weather</tool_name><parameters>"
        "<city>Lisbon</city></parameters></invoke>",
        source=ANTHROPIC_LEGACY,
    ),
    c(
        "glm-two-after-text",
        "glm45",
        "I will check the weather first.\n\n<tool_call>get_weather\n<arg_key>city</arg_key>\n"
        "<arg_value>Lisbon</arg_value>\n</tool_call>\n\nMeanwhile, I will also search.\n\n"
        "<tool_call>search\n<arg_key>query</arg_key>\n<arg_value>python asyncio</arg_value>\n"
        "</tool_call>",
        LISBON,
        SEARCH,
        source=GLM45,
    ),
    c(
        "neg-glm-in-think",
        "glm45",
        "<think>Maybe <tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Lisbon"
        "</arg_value>\n</tool_call></think>\nLisbon is usually mild.",
        source=GLM45,
    ),
    c(
        "transcript",
        "transcript",
        '[Calling tool: get_weather with arguments: {"city": "Lisbon"}]',
        LISBON,
        source=TRANSCRIPT,
    ),
    c(
        "transcript-after-text",
        "transcript",
        'Let me look that up.\n[Calling tool: search with arguments: {"query": "python asyncio"}]'
        "\n",
        SEARCH,
        source=TRANSCRIPT,
    ),
    c("neg-transcript-status", "transcript", "[Calling tool: get_time]", source=TRANSCRIPT),
    c(
        "neg-transcript-cut",
        "transcript",
        '[Calling tool: get_weather with arguments: {"city": "Lis',
        source=TRANSCRIPT,
    ),
    c(
        "neg-transcript-narration",
        "transcript",
        'Earlier I ran [Calling tool: get_weather with arguments: {"city": "Lisbon"}] and it '
        "said sunny.",
        source=TRANSCRIPT,
    ),
    c(
        "neg-inline-code-json",
        "inline_code",
        f"To get the weather, send `{W}` and the tool returns the forecast.",
        source=INLINE,
    ),
    c(
        "neg-inline-code-hermes",
        "inline_code",
        f"A Hermes model writes `<tool_call>{W}</tool_call>` when it calls a tool.",
        source=INLINE,
    ),
    c(
        "neg-inline-code-pythonic",
        "inline_code",
        'Write `[get_weather(city="Lisbon")]` on its own line to call it.',
        source=INLINE,
    ),
    c(
        "neg-inline-code-double",
        "inline_code",
        f"The model should reply with ``{W}`` and nothing else.",
        source=INLINE,
    ),
    c("inline-code-whole-reply", "inline_code", f"`{W}`", LISBON, source=INLINE),
    c(
        "inline-code-beside-call",
        "inline_code",
        f"Checking `Lisbon` for you.\n<tool_call>{W}</tool_call>",
        LISBON,
        source=INLINE,
    ),
    c(
        "backticks-in-arguments",
        "inline_code",
        '<tool_call>{"name": "run_commands", "arguments": {"commands": ["echo `date`", "ls"]}}'
        "</tool_call>",
        ("run_commands", {"commands": ["echo `date`", "ls"]}),
        source=INLINE,
    ),
    c("neg-name-only-prose", "negative", 'Use {"name": "get_time"} for clocks.'),
    c(
        "neg-suggestion",
        "negative",
        f"I can't check that myself, but I can suggest using the tool like this:\n{W}",
    ),
]


def _scan(case: Case) -> RescueScan:
    return scan_tool_calls(case.text, TOOLS)


def _found(scan: RescueScan) -> list[Call]:
    return [(call.name, call.arguments) for call in scan.calls + scan.refused]


def _key(call: Call) -> str:
    return json.dumps(call, sort_keys=True)


def test_corpus_size_and_balance() -> None:
    """The corpus has at least 80 cases, a third of them negative, over the listed formats."""
    negatives = [case for case in CORPUS if not case.calls]
    assert len(CORPUS) >= 80
    assert len(negatives) * 3 >= len(CORPUS)
    assert len({case.id for case in CORPUS}) == len(CORPUS)
    formats = {case.fmt for case in CORPUS}
    for fmt in ("bare_json", "openai_shape", "json_fence", "hermes", "llama_function_tag"):
        assert fmt in formats
    for fmt in ("pythonic", "mistral", "anthropic_xml", "qwen3_coder_xml", "react"):
        assert fmt in formats
    assert {"deepseek", "kimi", "multi", "prose"} <= formats
    for fmt in ("harmony", "gemma", "dsml", "step3", "apertus", "llama_builtin", "functionary"):
        assert fmt in formats
    assert {"glm45", "transcript", "inline_code"} <= formats


@pytest.mark.parametrize("case", CORPUS, ids=lambda case: case.id)
def test_case(case: Case) -> None:
    """Each text yields exactly its calls, in text order."""
    assert _found(_scan(case)) == case.calls


KNOWN_MISSES = {
    "functionary-python-lines": "without its `>>>` marker only a JSON body is read: a reply "
    "opening with a tool name and raw text is too easily prose",
}
"""Peer cases rescue does not read, on purpose; they still count against recall."""


@pytest.mark.parametrize("case", PEER_CORPUS, ids=lambda case: case.id)
def test_peer_case(case: PeerCase) -> None:
    """Each peer text yields its calls in order (a known miss yields no wrong call), and the
    reasoning the peer extracts when its test states it."""
    scan = scan_tool_calls(case.text, list(case.tools))
    found = _found(scan)
    if case.id in KNOWN_MISSES:
        assert all(call in case.calls for call in found)
    else:
        assert found == case.calls
    if case.reasoning is not None:
        assert scan.reasoning == case.reasoning


@pytest.mark.parametrize("divergence", DIVERGENCES, ids=lambda d: d.case.id)
def test_divergence_from_peer(divergence: Any) -> None:
    """Where rescue's policy contradicts a peer's test, rescue keeps its policy."""
    case = divergence.case
    found = _found(scan_tool_calls(case.text, list(case.tools)))
    assert found == case.calls
    assert found != divergence.peer_calls


def _score(cases: list[tuple[str, list[Call], list[Call]]]) -> dict[str, Counter[str]]:
    stats: dict[str, Counter[str]] = {}
    for fmt, found_calls, expected_calls in cases:
        found = Counter(_key(call) for call in found_calls)
        expected = Counter(_key(call) for call in expected_calls)
        s = stats.setdefault(fmt, Counter())
        s["tp"] += sum((found & expected).values())
        s["fp"] += sum((found - expected).values())
        s["fn"] += sum((expected - found).values())
        s["cases"] += 1
    return stats


def _print_table(title: str, stats: dict[str, Counter[str]]) -> Counter[str]:
    total: Counter[str] = sum(stats.values(), Counter())
    print(f"\n{title}\n{'format':<20}{'cases':>6}{'calls':>7}{'precision':>11}{'recall':>8}")
    for fmt, s in [*sorted(stats.items()), ("overall", total)]:
        precision, recall = _ratio(s["tp"], s["fp"]), _ratio(s["tp"], s["fn"])
        calls = s["tp"] + s["fn"]
        print(f"{fmt:<20}{s['cases']:>6}{calls:>7}{precision:>11.3f}{recall:>8.3f}")
    return total


def test_precision_and_recall() -> None:
    """Per-format precision and recall over both corpora: the own corpus has no false
    positive, and over both, precision is at least 99 % and recall at least 97 %."""
    own = _score([(c.fmt, _found(_scan(c)), c.calls) for c in CORPUS])
    peers = _score(
        [(c.fmt, _found(scan_tool_calls(c.text, list(c.tools))), c.calls) for c in PEER_CORPUS]
    )
    own_total = _print_table("own corpus", own)
    peer_total = _print_table("peer corpus (vLLM, SGLang, llama.cpp, Ollama)", peers)
    both = own_total + peer_total
    precision, recall = _ratio(both["tp"], both["fp"]), _ratio(both["tp"], both["fn"])
    print(f"\nboth corpora: {both['cases']} cases, precision {precision:.3f}, recall {recall:.3f}")
    assert own_total["fp"] == 0
    assert precision >= 0.99
    assert recall >= 0.97


def _ratio(tp: int, other: int) -> float:
    return tp / (tp + other) if tp + other else 1.0


def test_refused_tool_is_reported_not_returned() -> None:
    """A call to a `rescue=False` tool is never returned as a call; it is reported refused."""
    text = '<tool_call>{"name": "send_mail", "arguments": {"to": "ana@example.com", "body": "hi"}}</tool_call>'
    scan = scan_tool_calls(text, TOOLS)
    assert scan.calls == []
    assert [(r.name, r.arguments, r.ok, r.source) for r in scan.refused] == [
        ("send_mail", {"to": "ana@example.com", "body": "hi"}, False, "rescued")
    ]
    assert scan.refused[0].error == (
        "the tool does not accept calls written as text (declared with "
        "`@tool(rescue=False)`); call it through the tool channel"
    )
    assert rescue_tool_calls(text, TOOLS) == []


def test_refused_and_rescued_together() -> None:
    """Ids are given once, in text order over both lists; both lists keep text order."""
    text = (
        '<tool_call>{"name": "send_mail", "arguments": {"to": "a@b.c", "body": "x"}}</tool_call>\n'
        f"<tool_call>{W}</tool_call>"
    )
    scan = scan_tool_calls(text, TOOLS)
    assert [(call.id, call.name) for call in scan.calls] == [("rescued-2", "get_weather")]
    assert [(r.id, r.name) for r in scan.refused] == [("rescued-1", "send_mail")]


def test_rescued_call_records() -> None:
    """Calls are `ToolCall` records with `source="rescued"` and numbered ids, not yet run."""
    calls = rescue_tool_calls(f"<tool_call>{W}</tool_call>[search(query='x')]", TOOLS)
    assert [(call.id, call.source, call.ok) for call in calls] == [
        ("rescued-1", "rescued", None),
        ("rescued-2", "rescued", None),
    ]
    again = scan_tool_calls(f"<tool_call>{W}</tool_call>", TOOLS, id_prefix="rescued-ab12")
    assert [c.id for c in again.calls] == ["rescued-ab12-1"]


def test_unknown_tools_and_no_tools() -> None:
    """With no tools, nothing is rescued; a name is never remapped to a similar tool."""
    assert rescue_tool_calls(W, []) == []
    assert rescue_tool_calls('{"name": "weather", "arguments": {"city": "Lisbon"}}', TOOLS) == []
