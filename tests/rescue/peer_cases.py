"""Model outputs and the calls they hold, transcribed from the tool-parser tests of vLLM,
SGLang, llama.cpp and Ollama (and openai/harmony, whose format vLLM and llama.cpp follow),
and from LlamaIndex's ReAct output-parser tests.

The strings and the expected calls are the peers' facts; each case names where it comes
from (repository, file, test). Tool schemas follow each test's fixtures. A few peer
expectations contradict rescue's policy on purpose; those cases are in `DIVERGENCES`
instead, with the reason, and are checked on their own rather than scored.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from thena_nb.core.records.model import ToolSpec

Call = tuple[str, dict[str, Any]]


def spec(tool_name: str, /, *required: str, **props: Any) -> ToolSpec:
    """A tool whose properties are `name=type` (or a full schema dict), `required` first."""
    properties = {
        key: value if isinstance(value, dict) else {"type": value} for key, value in props.items()
    }
    for key in required:
        properties.setdefault(key, {"type": "string"})
    return ToolSpec(
        name=tool_name,
        parameters={"type": "object", "properties": properties, "required": list(required)},
    )


STR, INT, NUM, BOOL, ARR, OBJ = "string", "integer", "number", "boolean", "array", "object"


@dataclass(frozen=True)
class PeerCase:
    """One model output, the calls it holds, and where both come from."""

    id: str
    fmt: str
    origin: str
    tools: tuple[ToolSpec, ...]
    text: str
    calls: list[Call] = field(default_factory=list)
    reasoning: str | None = None
    """The reasoning the peer extracts, when its test states it."""


def p(
    id: str,
    fmt: str,
    origin: str,
    tools: tuple[ToolSpec, ...],
    text: str,
    *calls: Call,
    reasoning: str | None = None,
) -> PeerCase:
    return PeerCase(id, fmt, origin, tools, text, list(calls), reasoning)


# -- gpt-oss harmony ---------------------------------------------------------------------------

VLLM_HARMONY = "vllm-project/vllm tests/parser/test_harmony.py"
VLLM_OPENAI = "vllm-project/vllm tests/tool_parsers/test_openai_tool_parser.py"
SGLANG_GPT_OSS = "sgl-project/sglang test/registered/function_call/test_gpt_oss_detector.py"
LLAMA_CPP = "ggml-org/llama.cpp tests/test-chat.cpp"
OLLAMA_HARMONY = "ollama/ollama harmony/harmonyparser_test.go"
HARMONY_DOCS = "openai/harmony docs/format.md"
HARMONY_TESTS = "openai/harmony tests/test_harmony.py"

HARMONY_TOOLS = (
    spec("get_current_weather", "location", unit=STR),
    spec("get_user_location", location=STR),
    spec("no_content_type", location=STR),
    spec("not_json_no_content_type", "input"),
    spec("empty_args"),
    spec("no_args"),
    spec("get_weather", location=STR, city=STR, latitude=NUM, longitude=NUM),
    spec("get_time", timezone=STR),
    spec("search", "query"),
    spec("tool_a", a=INT),
    spec("tool_b", b=INT),
    spec("tool_c", c=INT),
    spec("math.sum", a=INT, b=INT),
    spec("read_file", files=ARR),
    spec("generate_file", template=STR, path=STR),
)
SPECIAL = (
    spec("special_function", "arg1", arg1=INT),
    spec("python", "code"),
    spec("code_interpreter", "code"),
    spec("edit", "oldString", "newString", replaceAll=BOOL),
)

HARMONY = [
    p(
        "harmony-sglang-truncate-normal",
        "harmony",
        f"{SGLANG_GPT_OSS} test_detect_and_parse_truncate_normal",
        HARMONY_TOOLS,
        "<|channel|>analysis<|message|>Reasoning...<|end|>"
        "<|start|>assistant<|channel|>commentary to=functions.read_file <|constrain|>json"
        '<|message|>{\n  "files": []\n}<|call|>'
        "<|start|>assistant<|channel|>final<|message|>This text should be truncated.",
        ("read_file", {"files": []}),
        reasoning="Reasoning...",
    ),
    p(
        "harmony-sglang-empty-object",
        "harmony",
        f"{SGLANG_GPT_OSS} test_parse_streaming_fast_path_fix",
        HARMONY_TOOLS,
        "<|start|>assistant<|channel|>commentary to=functions.read_file <|constrain|>json"
        "<|message|>{}<|call|>",
        ("read_file", {}),
    ),
    p(
        "harmony-vllm-single",
        "harmony",
        f"{VLLM_OPENAI} test_extract_tool_calls_single_tool (rendered with openai_harmony)",
        HARMONY_TOOLS,
        '<|channel|>analysis<|message|>User asks: "What is the weather in Tokyo?" We need to '
        "use get_current_weather tool.<|end|><|start|>assistant<|channel|>commentary "
        'to=functions.get_current_weather <|constrain|>json<|message|>{"location": "Tokyo"}'
        "<|call|>",
        ("get_current_weather", {"location": "Tokyo"}),
        reasoning='User asks: "What is the weather in Tokyo?" We need to use get_current_weather'
        " tool.",
    ),
    p(
        "harmony-vllm-single-newlines",
        "harmony",
        f"{VLLM_HARMONY} TestParse::test_single_tool_call (arguments with newlines, as rendered)",
        HARMONY_TOOLS,
        "<|channel|>commentary to=functions.get_current_weather <|constrain|>json"
        '<|message|>{\n"location": "Tokyo"\n}<|call|>',
        ("get_current_weather", {"location": "Tokyo"}),
    ),
    p(
        "harmony-vllm-single-analysis-channel",
        "harmony",
        f"{VLLM_HARMONY} TestParse::test_single_tool_call (analysis channel, as rendered)",
        HARMONY_TOOLS,
        "<|channel|>analysis to=functions.get_current_weather <|constrain|>json"
        '<|message|>{"location": "Tokyo"}<|call|>',
        ("get_current_weather", {"location": "Tokyo"}),
    ),
    p(
        "harmony-vllm-varied-formats",
        "harmony",
        f"{VLLM_HARMONY} TestParse::test_multiple_tool_calls_varied_formats",
        HARMONY_TOOLS,
        "<|channel|>commentary to=functions.get_current_weather <|constrain|>json"
        '<|message|>{"location": "Tokyo"}<|call|>'
        "<|start|>assistant<|channel|>commentary to=functions.get_user_location "
        '<|constrain|>json<|message|>{"location": "Tokyo"}<|call|>'
        "<|start|>assistant<|channel|>commentary to=functions.no_content_type"
        '<|message|>{"location": "Tokyo"}<|call|>'
        "<|start|>assistant<|channel|>commentary to=functions.not_json_no_content_type"
        "<|message|>foo<|call|>"
        "<|start|>assistant<|channel|>commentary to=functions.empty_args <|constrain|>json"
        "<|message|>{}<|call|>"
        "<|start|>assistant<|channel|>commentary to=functions.no_args <|constrain|>json"
        "<|message|><|call|>",
        ("get_current_weather", {"location": "Tokyo"}),
        ("get_user_location", {"location": "Tokyo"}),
        ("no_content_type", {"location": "Tokyo"}),
        ("not_json_no_content_type", {"input": "foo"}),
        ("empty_args", {}),
        ("no_args", {}),
    ),
    p(
        "harmony-vllm-bare-recipient",
        "harmony",
        f"{VLLM_HARMONY} TestParse::test_tool_call_bare_recipient",
        HARMONY_TOOLS,
        "<|channel|>commentary to=get_current_weather <|constrain|>json"
        '<|message|>{"location": "Tokyo"}<|call|>',
        ("get_current_weather", {"location": "Tokyo"}),
    ),
    p(
        "harmony-vllm-assistant-recipient",
        "harmony",
        f"{VLLM_HARMONY} TestParse::test_assistant_recipient_not_tool",
        HARMONY_TOOLS,
        "<|channel|>commentary to=assistant<|message|>Some tool response<|end|>"
        "<|start|>assistant<|channel|>final<|message|>Here is the answer<|return|>",
    ),
    p(
        "harmony-vllm-dotted-name",
        "harmony",
        f"{VLLM_HARMONY} TestParse::test_tool_call_dotted_name",
        HARMONY_TOOLS,
        '<|channel|>commentary to=math.sum <|constrain|>json<|message|>{"a": 2, "b": 3}<|call|>',
        ("math.sum", {"a": 2, "b": 3}),
    ),
    p(
        "harmony-vllm-with-final",
        "harmony",
        f"{VLLM_HARMONY} TestParse::test_tool_calls_with_final_content",
        HARMONY_TOOLS,
        "<|channel|>analysis<|message|>User asked about the weather.<|end|>"
        "<|start|>assistant<|channel|>commentary to=functions.get_current_weather "
        '<|constrain|>json<|message|>{"location": "Tokyo"}<|call|>'
        "<|start|>assistant<|channel|>final<|message|>This tool call will get the weather."
        "<|return|>",
        ("get_current_weather", {"location": "Tokyo"}),
        reasoning="User asked about the weather.",
    ),
    p(
        "harmony-vllm-truncated-final",
        "harmony",
        f"{VLLM_HARMONY} TestParse::test_truncated_output",
        HARMONY_TOOLS,
        "<|channel|>analysis<|message|>I'm thinking.<|end|>"
        "<|start|>assistant<|channel|>final<|message|>I'm in the middle of answering",
        reasoning="I'm thinking.",
    ),
    p(
        "harmony-vllm-malformed",
        "harmony",
        f"{VLLM_HARMONY} TestParse::test_malformed_msgs_recovers_raw_content",
        HARMONY_TOOLS,
        "<|channel|>analysis<|message|>thinking<|end|>"
        "<|start|>assistant<|channel|>commentary<|message|>thinking<|end|>"
        '<|start|>assistant<|channel|>final {"answer": "hi"}<|return|>',
    ),
    p(
        "harmony-vllm-preambles",
        "harmony",
        f"{VLLM_HARMONY} TestParse::test_commentary_preambles",
        HARMONY_TOOLS,
        "<|channel|>commentary<|message|>Let me look that up.<|end|>"
        "<|start|>assistant<|channel|>final<|message|>The answer is 42.<|end|>",
    ),
    p(
        "harmony-vllm-recipient-in-role",
        "harmony",
        f"{VLLM_HARMONY} TestParse::test_commentary_with_recipient_excluded",
        HARMONY_TOOLS,
        "<|channel|>commentary<|message|>Let me check the weather.<|end|>"
        "<|start|>assistant to=functions.get_weather<|channel|>commentary"
        '<|message|>{"location": "SF"}<|end|>',
        ("get_weather", {"location": "SF"}),
    ),
    p(
        "harmony-vllm-split-deltas",
        "harmony",
        f"{VLLM_HARMONY} TestParseDelta::test_tool_call_split_across_deltas[commentary]",
        HARMONY_TOOLS,
        "<|channel|>analysis<|message|>Thinking<|end|>"
        "<|start|>assistant to=functions.get_weather<|channel|>commentary"
        '<|constrain|>json<|message|>{"location": "Paris"}<|call|>',
        ("get_weather", {"location": "Paris"}),
        reasoning="Thinking",
    ),
    p(
        "harmony-vllm-split-deltas-analysis",
        "harmony",
        f"{VLLM_HARMONY} TestParseDelta::test_tool_call_split_across_deltas[analysis]",
        HARMONY_TOOLS,
        "<|channel|>analysis<|message|>Thinking<|end|>"
        "<|start|>assistant to=functions.get_weather<|channel|>analysis"
        '<|constrain|>json<|message|>{"location": "Paris"}<|call|>',
        ("get_weather", {"location": "Paris"}),
        reasoning="Thinking",
    ),
    p(
        "harmony-vllm-cross-channel",
        "harmony",
        f"{VLLM_HARMONY} TestParseDelta::test_cross_channel_with_tool",
        HARMONY_TOOLS,
        "<|channel|>analysis<|message|>Reasoning about query...<|end|>"
        "<|start|>assistant to=functions.search<|channel|>commentary"
        '<|constrain|>json<|message|>{"query": "vllm"}<|call|>'
        "<|start|>assistant<|channel|>final<|message|>Done",
        ("search", {"query": "vllm"}),
        reasoning="Reasoning about query...",
    ),
    p(
        "harmony-vllm-two-calls",
        "harmony",
        f"{VLLM_HARMONY} TestParseDelta::test_tool_index_across_calls (deltas joined)",
        HARMONY_TOOLS,
        "<|channel|>analysis<|message|>Thinking<|end|>"
        "<|start|>assistant to=functions.get_weather<|channel|>commentary"
        '<|constrain|>json<|message|>{"location": "Paris"}<|call|>'
        "<|start|>assistant to=functions.get_time<|channel|>commentary"
        '<|constrain|>json<|message|>{"timezone": "UTC"}<|call|>',
        ("get_weather", {"location": "Paris"}),
        ("get_time", {"timezone": "UTC"}),
    ),
    p(
        "harmony-vllm-interleaved",
        "harmony",
        f"{VLLM_HARMONY} TestParseDelta::test_multi_tool_interleaved (deltas joined)",
        HARMONY_TOOLS,
        "<|channel|>analysis<|message|>Plan<|end|>"
        "<|start|>assistant to=functions.tool_a<|channel|>commentary"
        '<|constrain|>json<|message|>{"a": 1}<|call|>'
        "<|start|>assistant to=functions.tool_b<|channel|>commentary"
        '<|constrain|>json<|message|>{"b": 2}<|call|>'
        "<|start|>assistant<|channel|>final<|message|>Done<|end|>"
        "<|start|>assistant to=functions.tool_c<|channel|>commentary"
        '<|constrain|>json<|message|>{"c": 3}',
        ("tool_a", {"a": 1}),
        ("tool_b", {"b": 2}),
        ("tool_c", {"c": 3}),
    ),
    p(
        "harmony-vllm-builtin-browser",
        "harmony",
        f"{VLLM_HARMONY} TestParseDelta::test_builtin_recipient_skipped[browser]",
        HARMONY_TOOLS,
        "<|channel|>commentary to=browser<|message|>Ignore this<|call|>",
    ),
    p(
        "harmony-llamacpp-call-after-analysis",
        "harmony",
        f"{LLAMA_CPP} gpt-oss: analysis then commentary call",
        SPECIAL,
        "<|channel|>analysis<|message|>I'm\nthinking<|end|>"
        "<|start|>assistant<|channel|>commentary to=functions.special_function "
        '<|constrain|>json<|message|>{"arg1": 1}',
        ("special_function", {"arg1": 1}),
        reasoning="I'm\nthinking",
    ),
    p(
        "harmony-llamacpp-partial-args",
        "harmony",
        f"{LLAMA_CPP} gpt-oss: call cut inside its arguments (is_partial)",
        SPECIAL,
        "<|channel|>analysis<|message|>I'm\nthinking<|end|>"
        "<|start|>assistant<|channel|>commentary to=functions.special_function "
        '<|constrain|>json<|message|>{"arg1',
        reasoning="I'm\nthinking",
    ),
    p(
        "harmony-llamacpp-final",
        "harmony",
        f"{LLAMA_CPP} gpt-oss: analysis then final",
        SPECIAL,
        "<|channel|>analysis<|message|>I'm\nthinking<|end|>"
        "<|start|>assistant<|channel|>final<|message|>Hello, world!\nWhat's up?",
        reasoning="I'm\nthinking",
    ),
    p(
        "harmony-llamacpp-recipient-in-channel-analysis",
        "harmony",
        f"{LLAMA_CPP} gpt-oss: tool call with recipient in channel header",
        SPECIAL,
        '<|channel|>analysis to=functions.special_function<|message|>{"arg1": 1}',
        ("special_function", {"arg1": 1}),
    ),
    p(
        "harmony-llamacpp-recipient-in-channel-commentary",
        "harmony",
        f"{LLAMA_CPP} gpt-oss: tool call in commentary channel",
        SPECIAL,
        '<|channel|>commentary to=functions.special_function<|message|>{"arg1": 1}',
        ("special_function", {"arg1": 1}),
    ),
    p(
        "harmony-llamacpp-recipient-in-role",
        "harmony",
        f"{LLAMA_CPP} gpt-oss: tool call with constraint (output starts after the role)",
        SPECIAL,
        ' to=functions.special_function<|channel|>analysis <|constrain|>json<|message|>{"arg1": 1}',
        ("special_function", {"arg1": 1}),
    ),
    p(
        "harmony-llamacpp-edit-code",
        "harmony",
        f"{LLAMA_CPP} gpt-oss: complex tool calling (edit)",
        SPECIAL,
        "<|channel|>analysis<|message|>Thinking about edit...<|end|>"
        "<|start|>assistant<|channel|>commentary to=functions.edit <|constrain|>json"
        '<|message|>{"oldString": "if (part < railCount - 1) {", "newString": "if (part < 4) {", '
        '"replaceAll": false}',
        (
            "edit",
            {
                "oldString": "if (part < railCount - 1) {",
                "newString": "if (part < 4) {",
                "replaceAll": False,
            },
        ),
    ),
    p(
        "harmony-llamacpp-builtin-python",
        "harmony",
        f"{LLAMA_CPP} gpt-oss: unsolicited call to the built-in python tool",
        SPECIAL[:1],
        "<|channel|>analysis<|message|>I will execute python to say hello<|end|>"
        '<|start|>assistant<|channel|>commentary to=python <|constrain|>code<|message|>print("hello")',
    ),
    p(
        "harmony-llamacpp-commentary-content",
        "harmony",
        f"{LLAMA_CPP} gpt-oss: basic content only, commentary channel",
        SPECIAL,
        "<|channel|>commentary<|message|>Hello, world!\nWhat's up?",
    ),
    p(
        "harmony-llamacpp-stray-header",
        "harmony",
        f"{LLAMA_CPP} gpt-oss: stray '<|channel|>commentary to=assistant' before reasoning",
        SPECIAL,
        "<|channel|>commentary to=assistant<|channel|>analysis<|message|>I'm\nthinking<|end|>"
        "<|start|>assistant<|channel|>final<|message|>Hello, world!\nWhat's up?",
    ),
    p(
        "harmony-ollama-tool-response-not-a-call",
        "harmony",
        f"{OLLAMA_HARMONY} TestHarmonyParserHeaderEvent case 2",
        HARMONY_TOOLS,
        "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
        '<|message|>{"location":"San Francisco"}<|call|><|start|>functions.get_weather '
        'to=assistant<|message|>{"sunny": true, "temperature": 20}<|end|>',
        ("get_weather", {"location": "San Francisco"}),
    ),
    p(
        "harmony-ollama-implicit-start",
        "harmony",
        f"{OLLAMA_HARMONY} TestHarmonyParserHeaderEvent case 3 (implicit start)",
        HARMONY_TOOLS,
        "<|channel|>analysis<|message|>User asks weather in SF. We need location. Use "
        'get_current_weather with location "San Francisco, CA".<|end|><|start|>assistant'
        "<|channel|>commentary to=functions.get_current_weather <|constrain|>json"
        '<|message|>{"location":"San Francisco, CA"}<|call|>',
        ("get_current_weather", {"location": "San Francisco, CA"}),
    ),
    p(
        "harmony-spec-receiving-tool-calls",
        "harmony",
        f"{HARMONY_DOCS} Receiving tool calls",
        HARMONY_TOOLS,
        "<|channel|>analysis<|message|>Need to use function get_weather.<|end|><|start|>assistant"
        "<|channel|>commentary to=functions.get_weather <|constrain|>json"
        '<|message|>{"location":"San Francisco"}<|call|>',
        ("get_weather", {"location": "San Francisco"}),
        reasoning="Need to use function get_weather.",
    ),
    p(
        "harmony-spec-preamble",
        "harmony",
        f"{HARMONY_DOCS} Preambles",
        HARMONY_TOOLS,
        "<|channel|>analysis<|message|>{long chain of thought}<|end|><|start|>assistant"
        "<|channel|>commentary<|message|>**Action plan**:\n1. Generate an HTML file\n2. Generate "
        "a JavaScript for the Node.js server\n3. Start the server\n---\nWill start executing the "
        "plan step by step<|end|><|start|>assistant<|channel|>commentary "
        "to=functions.generate_file<|constrain|>json<|message|>"
        '{"template": "basic_html", "path": "index.html"}<|call|>',
        ("generate_file", {"template": "basic_html", "path": "index.html"}),
    ),
    p(
        "harmony-lib-constrain-adjacent",
        "harmony",
        f"{HARMONY_TESTS} test_tool_call_with_channel_before_recipient_and_constrain_adjacent",
        HARMONY_TOOLS,
        "<|channel|>commentary to=functions.get_weather<|constrain|>json"
        '<|message|>{"latitude":48.8566,"longitude":2.3522}<|call|>',
        ("get_weather", {"latitude": 48.8566, "longitude": 2.3522}),
    ),
    p(
        "harmony-lib-role-recipient-adjacent",
        "harmony",
        f"{HARMONY_TESTS} test_tool_call_with_constrain_marker_adjacent",
        HARMONY_TOOLS,
        " to=functions.get_weather<|channel|>commentary<|constrain|>json"
        '<|message|>{"location": "Tokyo"}<|call|>',
        ("get_weather", {"location": "Tokyo"}),
    ),
]

# -- Gemma 4 -----------------------------------------------------------------------------------

OLLAMA_GEMMA4 = "ollama/ollama model/parsers/gemma4_test.go"
VLLM_GEMMA4 = "vllm-project/vllm tests/tool_parsers/test_gemma4_regex_and_bare_calls.py"
G = '<|"|>'

GEMMA_TOOLS = (
    spec("get_weather", location=STR, units=STR),
    spec("set_temp", value=NUM),
    spec("toggle", enabled=BOOL),
    spec("set_optional", value={}, nested=OBJ),
    spec("process", config=OBJ, items=ARR),
    spec("bash", "command"),
    spec("search", query=STR, note=STR),
    spec("exec", "command"),
    spec("plan", steps=ARR),
    spec("edit", edits=ARR),
    spec("open_file", "path"),
    spec("create_workflow", connections=OBJ),
)
VLLM_GEMMA_TOOLS = (
    spec("bash", "command"),
    spec("gdb", "args"),
    spec("read_file", "path"),
    spec("get_weather", "city"),
    spec("web-search", "query"),
    spec("fs.read_file", "path"),
)


def gemma(id: str, test: str, text: str, *calls: Call, reasoning: str | None = None) -> PeerCase:
    origin = f"{OLLAMA_GEMMA4} TestGemma4Parser/{test}"
    return p(id, "gemma4", origin, GEMMA_TOOLS, text, *calls, reasoning=reasoning)


PARIS: Call = ("get_weather", {"location": "Paris"})

GEMMA4 = [
    gemma(
        "gemma4-simple",
        "tool_call_simple",
        f"<|tool_call>call:get_weather{{location:{G}Paris{G}}}<tool_call|>",
        PARIS,
    ),
    gemma(
        "gemma4-multiple-args",
        "tool_call_with_multiple_args",
        f"<|tool_call>call:get_weather{{location:{G}Paris{G},units:{G}metric{G}}}<tool_call|>",
        ("get_weather", {"location": "Paris", "units": "metric"}),
    ),
    gemma(
        "gemma4-number",
        "tool_call_with_number_arg",
        "<|tool_call>call:set_temp{value:42}<tool_call|>",
        ("set_temp", {"value": 42}),
    ),
    gemma(
        "gemma4-boolean",
        "tool_call_with_boolean_arg",
        "<|tool_call>call:toggle{enabled:true}<tool_call|>",
        ("toggle", {"enabled": True}),
    ),
    gemma(
        "gemma4-null",
        "tool_call_with_null_arg",
        "<|tool_call>call:set_optional{value:null,nested:{value:null}}<tool_call|>",
        ("set_optional", {"value": None, "nested": {"value": None}}),
    ),
    gemma(
        "gemma4-nested-object",
        "tool_call_with_nested_object",
        f"<|tool_call>call:process{{config:{{enabled:true,name:{G}test{G}}}}}<tool_call|>",
        ("process", {"config": {"enabled": True, "name": "test"}}),
    ),
    gemma(
        "gemma4-array",
        "tool_call_with_array",
        f"<|tool_call>call:process{{items:[{G}a{G},{G}b{G}]}}<tool_call|>",
        ("process", {"items": ["a", "b"]}),
    ),
    gemma(
        "gemma4-array-quoted",
        "tool_call_with_array_of_multiple_gemma_quoted_strings",
        f'<|tool_call>call:process{{items:[{G}a{G},{G}b "quoted"{G},{G}c{G}]}}<tool_call|>',
        ("process", {"items": ["a", 'b "quoted"', "c"]}),
    ),
    gemma(
        "gemma4-multiline",
        "tool_call_with_multiline_string_arg",
        f"<|tool_call>call:bash{{command:{G}date\n{G}}}<tool_call|>",
        ("bash", {"command": "date\n"}),
    ),
    gemma(
        "gemma4-escaped-quotes",
        "tool_call_with_escaped_double_quotes_in_string_arg",
        f'<|tool_call>call:search{{query:{G}say \\"hello\\"{G}}}<tool_call|>',
        ("search", {"query": 'say \\"hello\\"'}),
    ),
    gemma(
        "gemma4-unescaped-quotes",
        "tool_call_with_unescaped_double_quotes_in_string_arg",
        f'<|tool_call>call:search{{query:{G}say "hello"{G}}}<tool_call|>',
        ("search", {"query": 'say "hello"'}),
    ),
    gemma(
        "gemma4-quote-segments",
        "tool_call_with_multiple_unescaped_double_quote_segments",
        f'<|tool_call>call:search{{query:{G}say "hello", then "goodbye"{G}}}<tool_call|>',
        ("search", {"query": 'say "hello", then "goodbye"'}),
    ),
    gemma(
        "gemma4-mixed-quotes",
        "tool_call_with_mixed_escaped_and_unescaped_double_quotes",
        f'<|tool_call>call:search{{query:{G}first \\"quoted\\" then "raw"{G}}}<tool_call|>',
        ("search", {"query": 'first \\"quoted\\" then "raw"'}),
    ),
    gemma(
        "gemma4-exec-path",
        "tool_call_exec_with_embedded_quoted_path",
        f'<|tool_call>call:exec{{command:{G}ls -F "vault/"{G}}}<tool_call|>',
        ("exec", {"command": 'ls -F "vault/"'}),
    ),
    gemma(
        "gemma4-exec-url",
        "tool_call_exec_with_embedded_quoted_url",
        f'<|tool_call>call:exec{{command:{G}fetch "https://ollama.com/library/gemma4" --extract{G}}}<tool_call|>',
        ("exec", {"command": 'fetch "https://ollama.com/library/gemma4" --extract'}),
    ),
    gemma(
        "gemma4-no-close-tag",
        "tool_call_done_flush_without_close_tag_with_unescaped_double_quotes",
        f'<|tool_call>call:search{{query:{G}say "hello" and "bye"{G}}}',
        ("search", {"query": 'say "hello" and "bye"'}),
    ),
    gemma(
        "gemma4-raw-and-gemma-quotes",
        "tool_call_with_mixed_raw_and_gemma_quoted_values",
        f'<|tool_call>call:search{{query:"raw \\"quoted\\"",note:{G}gemma "quoted"{G}}}<tool_call|>',
        ("search", {"query": 'raw "quoted"', "note": 'gemma "quoted"'}),
    ),
    gemma(
        "gemma4-array-of-objects",
        "tool_call_with_array_of_objects_and_mixed_quotes",
        f'<|tool_call>call:plan{{steps:[{{title:{G}step "one"{G},done:false}},'
        f'{{title:{G}step \\"two\\"{G},done:true}}]}}<tool_call|>',
        (
            "plan",
            {
                "steps": [
                    {"title": 'step "one"', "done": False},
                    {"title": 'step \\"two\\"', "done": True},
                ]
            },
        ),
    ),
    gemma(
        "gemma4-edit-markdown",
        "tool_call_edit_with_array_of_objects_multiline_markdown_and_quotes",
        f"<|tool_call>call:edit{{edits:[\n  {{newText:{G}# Gemma4 + openclaude speed optimization guide\n\n"
        f'Use "nvfp4" only after validating tool calls.\n{G},oldText:{G}# Gemma4 + openclaude speed '
        f"optimization guide\n\nUse the default quantization.\n{G}}},\n  {{newText:{G}## 14. Methods "
        f'tried but not adopted\n\n### 1. Model quantization\nDo not enable "mxfp8" by default.\n{G},'
        f"oldText:{G}## 14. Methods tried but not adopted\n{G}}}\n]}}<tool_call|>",
        (
            "edit",
            {
                "edits": [
                    {
                        "newText": '# Gemma4 + openclaude speed optimization guide\n\nUse "nvfp4" only after validating tool calls.\n',
                        "oldText": "# Gemma4 + openclaude speed optimization guide\n\nUse the default quantization.\n",
                    },
                    {
                        "newText": '## 14. Methods tried but not adopted\n\n### 1. Model quantization\nDo not enable "mxfp8" by default.\n',
                        "oldText": "## 14. Methods tried but not adopted\n",
                    },
                ]
            },
        ),
    ),
    gemma(
        "gemma4-windows-path",
        "tool_call_with_windows_path_single_backslashes",
        f"<|tool_call>call:open_file{{path:{G}C:\\users\\bob\\file.txt{G}}}<tool_call|>",
        ("open_file", {"path": "C:\\users\\bob\\file.txt"}),
    ),
    gemma(
        "gemma4-two-calls",
        "multiple_tool_calls",
        f"<|tool_call>call:get_weather{{location:{G}Paris{G}}}<tool_call|>"
        f"<|tool_call>call:get_weather{{location:{G}London{G}}}<tool_call|>",
        PARIS,
        ("get_weather", {"location": "London"}),
    ),
    gemma(
        "gemma4-thinking-then-call",
        "thinking_then_tool_call",
        f"<|channel>thought\nI need to check the weather<channel|><|tool_call>call:get_weather{{location:{G}Paris{G}}}<tool_call|>",
        PARIS,
        reasoning="I need to check the weather",
    ),
    gemma(
        "gemma4-content-then-call",
        "content_then_tool_call",
        f"Let me check that for you.<|tool_call>call:get_weather{{location:{G}Paris{G}}}<tool_call|>",
        PARIS,
    ),
    gemma(
        "gemma4-thinking-only",
        "thinking_then_content",
        "<|channel>thought\nLet me think about this...<channel|>The answer is 42.",
        reasoning="Let me think about this...",
    ),
    gemma("gemma4-plain", "simple_content", "This is a simple response."),
    p(
        "gemma4-spaced-keys",
        "gemma4",
        f"{OLLAMA_GEMMA4} TestGemma4Parser_SpacedObjectKeys",
        GEMMA_TOOLS,
        f"<|tool_call>call:create_workflow{{connections:{{Basic LLM Chain:{{main:[{{node:{G}Ollama Chat Model{G}}}]}}, Ollama Chat Model:{{main:[]}}}}}}<tool_call|>",
        (
            "create_workflow",
            {
                "connections": {
                    "Basic LLM Chain": {"main": [{"node": "Ollama Chat Model"}]},
                    "Ollama Chat Model": {"main": []},
                }
            },
        ),
    ),
    p(
        "gemma4-extra-close-tags",
        "gemma4",
        f"{OLLAMA_GEMMA4} TestGemma4Parser_IgnoresExtraToolCallCloseTags/same_chunk_before_real_content",
        GEMMA_TOOLS,
        f"<|tool_call>call:get_weather{{location:{G}Paris{G}}}<tool_call|><tool_call|>Done.",
        PARIS,
    ),
    p(
        "gemma4-tool-response-boundary",
        "gemma4",
        f"{OLLAMA_GEMMA4} TestGemma4Parser_IgnoresToolResponseBoundaryAfterToolCall/same_chunk_before_real_content",
        GEMMA_TOOLS,
        f"<|tool_call>call:get_weather{{location:{G}Paris{G}}}<tool_call|><|tool_response>Done.",
        PARIS,
    ),
    p(
        "gemma4-vllm-canonical",
        "gemma4",
        f"{VLLM_GEMMA4} TestGemma4CanonicalFormats::test_canonical_tag_wrapped_call",
        VLLM_GEMMA_TOOLS,
        f"<|tool_call>call:bash{{command:{G}ls -la /work{G}}}<tool_call|>",
        ("bash", {"command": "ls -la /work"}),
    ),
    p(
        "gemma4-vllm-turn-close",
        "gemma4",
        f"{VLLM_GEMMA4} TestGemma4CanonicalFormats::test_turn_end_closure_instead_of_tool_call_end",
        VLLM_GEMMA_TOOLS,
        f"<|tool_call>call:gdb{{args:{G}-batch -ex run /tmp/poc{G}}}<turn|>",
        ("gdb", {"args": "-batch -ex run /tmp/poc"}),
    ),
    p(
        "gemma4-vllm-sequential",
        "gemma4",
        f"{VLLM_GEMMA4} TestGemma4CanonicalFormats::test_multiple_sequential_canonical_calls",
        VLLM_GEMMA_TOOLS,
        f"<|tool_call>call:read_file{{path:{G}/work/Makefile{G}}}<tool_call|>\n"
        f"<|tool_call>call:bash{{command:{G}make -j8{G}}}<tool_call|>",
        ("read_file", {"path": "/work/Makefile"}),
        ("bash", {"command": "make -j8"}),
    ),
    p(
        "gemma4-vllm-bare-after-channel-close",
        "gemma4",
        f"{VLLM_GEMMA4} TestGemma4CanonicalFormats::test_strict_mode_ignores_fallback_formats (lenient mode)",
        VLLM_GEMMA_TOOLS,
        f"<channel|>call:bash{{command:{G}ls{G}}}",
        ("bash", {"command": "ls"}),
    ),
    p(
        "gemma4-vllm-bare-after-thought",
        "gemma4",
        f"{VLLM_GEMMA4} TestGemma4FallbackFormats::test_bare_call_after_thought_channel",
        VLLM_GEMMA_TOOLS,
        "<|channel>thought\nI need to read the entry source file to inspect the crash point.\n"
        f"<channel|>call:bash{{command:{G}cat /work/src/entry.c{G}}}",
        ("bash", {"command": "cat /work/src/entry.c"}),
        reasoning="I need to read the entry source file to inspect the crash point.",
    ),
    p(
        "gemma4-vllm-colon-prefixed",
        "gemma4",
        f"{VLLM_GEMMA4} TestGemma4FallbackFormats::test_colon_prefixed_tool_call",
        VLLM_GEMMA_TOOLS,
        f"<|tool_call>:call:bash{{command:{G}pytest{G}}}",
        ("bash", {"command": "pytest"}),
    ),
    p(
        "gemma4-vllm-bare-line",
        "gemma4",
        f"{VLLM_GEMMA4} TestGemma4FallbackFormats::test_bare_call_with_leading_whitespace",
        VLLM_GEMMA_TOOLS,
        f"some prose\ncall:bash{{command:{G}make -j8{G}}}",
        ("bash", {"command": "make -j8"}),
    ),
    p(
        "gemma4-vllm-fragmented-tag",
        "gemma4",
        f"{VLLM_GEMMA4} TestGemma4FallbackFormats::test_fragmented_call_tag_from_multimodal",
        VLLM_GEMMA_TOOLS,
        f"<call>get_weather{{city:{G}Paris{G}}}",
        ("get_weather", {"city": "Paris"}),
    ),
    p(
        "gemma4-vllm-hyphenated",
        "gemma4",
        f"{VLLM_GEMMA4} TestGemma4FallbackFormats::test_hyphenated_tool_name",
        VLLM_GEMMA_TOOLS,
        f"call:web-search{{query:{G}gemma 4 release{G}}}",
        ("web-search", {"query": "gemma 4 release"}),
    ),
    p(
        "gemma4-vllm-dotted",
        "gemma4",
        f"{VLLM_GEMMA4} TestGemma4FallbackFormats::test_dotted_tool_name",
        VLLM_GEMMA_TOOLS,
        f"call:fs.read_file{{path:{G}/work/Makefile{G}}}",
        ("fs.read_file", {"path": "/work/Makefile"}),
    ),
    p(
        "gemma4-vllm-no-call",
        "gemma4",
        f"{VLLM_GEMMA4} TestGemma4FallbackFormats::test_no_tool_call_returns_empty",
        VLLM_GEMMA_TOOLS,
        "Just some reasoning text with no call in it.",
    ),
]

# -- FunctionGemma -----------------------------------------------------------------------------

OLLAMA_FUNCTIONGEMMA = "ollama/ollama model/parsers/functiongemma_test.go TestFunctionGemmaParser"
E = "<escape>"
FG_TOOLS = (
    spec("get_weather", "city"),
    spec("write_file", "content"),
    spec("add", a=INT, b=INT),
    spec("set_flag", enabled=BOOL, verbose=BOOL),
    spec("process", items=ARR),
    spec("update", data=OBJ),
    spec("get_time", timezone=STR),
    spec("set_temp", value=NUM),
    spec("test"),
    spec("greet", "name"),
    spec("search", "query", limit=INT, offset=INT),
    spec("create", config=OBJ),
    spec("first"),
    spec("second"),
)


def fg(id: str, test: str, text: str, *calls: Call) -> PeerCase:
    return p(id, "functiongemma", f"{OLLAMA_FUNCTIONGEMMA}/{test}", FG_TOOLS, text, *calls)


def fg_call(name: str, body: str) -> str:
    return f"<start_function_call>call:{name}{{{body}}}<end_function_call>"


FUNCTION_GEMMA = [
    fg(
        "fg-simple",
        "simple_tool_call",
        fg_call("get_weather", f"city:{E}Paris{E}"),
        ("get_weather", {"city": "Paris"}),
    ),
    fg(
        "fg-multiline",
        "multiline_string_argument",
        fg_call("write_file", f"content:{E}first line\nsecond line{E}"),
        ("write_file", {"content": "first line\nsecond line"}),
    ),
    fg(
        "fg-crlf",
        "chunked_multiline_string_argument",
        fg_call("write_file", f"content:{E}first line\r\nsecond line{E}"),
        ("write_file", {"content": "first line\r\nsecond line"}),
    ),
    fg(
        "fg-content-before",
        "content_before_tool_call",
        "Let me check." + fg_call("get_weather", f"city:{E}Paris{E}"),
        ("get_weather", {"city": "Paris"}),
    ),
    fg("fg-numeric", "numeric_arguments", fg_call("add", "a:1,b:2"), ("add", {"a": 1, "b": 2})),
    fg(
        "fg-boolean",
        "boolean_arguments",
        fg_call("set_flag", "enabled:true,verbose:false"),
        ("set_flag", {"enabled": True, "verbose": False}),
    ),
    fg(
        "fg-two-calls",
        "multiple_tool_calls",
        fg_call("get_weather", f"city:{E}Paris{E}") + fg_call("get_weather", f"city:{E}London{E}"),
        ("get_weather", {"city": "Paris"}),
        ("get_weather", {"city": "London"}),
    ),
    fg(
        "fg-array",
        "array_argument",
        fg_call("process", f"items:[{E}a{E},{E}b{E},{E}c{E}]"),
        ("process", {"items": ["a", "b", "c"]}),
    ),
    fg(
        "fg-object",
        "object_argument",
        fg_call("update", f"data:{{name:{E}test{E},value:42}}"),
        ("update", {"data": {"name": "test", "value": 42}}),
    ),
    fg("fg-no-arguments", "tool_call_with_no_arguments", fg_call("get_time", ""), ("get_time", {})),
    fg(
        "fg-float",
        "float_argument",
        fg_call("set_temp", "value:3.14"),
        ("set_temp", {"value": 3.14}),
    ),
    fg("fg-content-after", "content_after_tool_call", fg_call("test", "") + "Done!", ("test", {})),
    fg(
        "fg-unicode",
        "unicode_content_and_arguments",
        "こんにちは " + fg_call("greet", f"name:{E}日本語{E}"),
        ("greet", {"name": "日本語"}),
    ),
    fg(
        "fg-params",
        "multiple_params_sorted",
        fg_call("search", f"query:{E}test{E},limit:10,offset:0"),
        ("search", {"query": "test", "limit": 10, "offset": 0}),
    ),
    fg(
        "fg-nested",
        "nested_object_argument",
        fg_call("create", f"config:{{settings:{{enabled:true,name:{E}test{E}}}}}"),
        ("create", {"config": {"settings": {"enabled": True, "name": "test"}}}),
    ),
    fg(
        "fg-parallel",
        "parallel_tool_calls",
        fg_call("get_weather", f"city:{E}Paris{E}") + fg_call("get_time", f"timezone:{E}UTC{E}"),
        ("get_weather", {"city": "Paris"}),
        ("get_time", {"timezone": "UTC"}),
    ),
    fg(
        "fg-content-between",
        "content_between_tool_calls",
        fg_call("first", "") + "Some text here" + fg_call("second", ""),
        ("first", {}),
        ("second", {}),
    ),
    fg("fg-plain", "plain_content", "Hello, world!"),
    fg("fg-angle-brackets", "content_with_angle_brackets", "The result is a <value> tag"),
    fg("fg-partial-start-tag", "partial_start_tag_in_content", "Hello <start world"),
]

# -- DeepSeek-V3.2 DSML ------------------------------------------------------------------------

SGLANG_PARSER = "sgl-project/sglang test/registered/function_call/test_function_call_parser.py"
SGLANG_DSV32 = "sgl-project/sglang test/registered/function_call/test_deepseekv32_detector.py"
VLLM_DSV32 = "vllm-project/vllm tests/tool_parsers/test_deepseekv32_tool_parser.py"
FC, FC_END = "<｜DSML｜function_calls>", "</｜DSML｜function_calls>"
INV, INV_END = '<｜DSML｜invoke name="', "</｜DSML｜invoke>"
PAR, PAR_END = '<｜DSML｜parameter name="', "</｜DSML｜parameter>"

SGLANG_DSML_TOOLS = (
    spec("search", "query", topn=INT, source={"type": "string", "enum": ["web", "news"]}),
    spec("get_favorite_tourist_spot", "city"),
    spec("get_date"),
    spec("write_note", payload=OBJ),
)
VLLM_DSML_TOOLS = (
    spec("get_time"),
    spec("get_weather", location=STR, date=STR),
    spec("toggle", enabled=BOOL, count=INT),
    spec("score", value=INT),
    spec(
        "set_timer",
        wait={"anyOf": [{"type": "object"}, {"type": "null"}]},
        patches={"oneOf": [{"type": "array", "items": {"type": "object"}}, {"type": "null"}]},
    ),
    spec("update", tags=ARR, meta=OBJ),
    spec("set_val", count={"type": ["integer", "null"]}, label={"type": ["string", "null"]}),
    spec("clear", value={"type": ["integer", "null"]}),
    spec("echo", text=STR),
)


def dsml(name: str, *params: tuple[str, str, str]) -> str:
    body = "".join(f'{PAR}{k}" string="{t}">{v}{PAR_END}\n' for k, t, v in params)
    return f'{FC}\n{INV}{name}">\n{body}{INV_END}\n{FC_END}'


DSML = [
    p(
        "dsml-sglang-xml",
        "dsml",
        f"{SGLANG_PARSER} TestDeepSeekV32Detector::test_detect_and_parse_xml_format",
        SGLANG_DSML_TOOLS,
        "I'll help you with information about San Francisco and get its favorite tourist spot "
        "for you.\n\n\n        <｜DSML｜function_calls>\n\n"
        '            <｜DSML｜invoke name="get_favorite_tourist_spot">\n\n'
        '                <｜DSML｜parameter name="city" string="true">San Francisco'
        "</｜DSML｜parameter>\n\n            </｜DSML｜invoke>\n\n"
        '            <｜DSML｜invoke name="search">\n'
        '                <｜DSML｜parameter name="query" string="true">WebNav benchmark'
        "</｜DSML｜parameter>\n"
        '                <｜DSML｜parameter name="topn" string="false">10</｜DSML｜parameter>\n'
        '                <｜DSML｜parameter name="source" string="true">web</｜DSML｜parameter>\n'
        "            </｜DSML｜invoke>\n        </｜DSML｜function_calls>\n        ",
        ("get_favorite_tourist_spot", {"city": "San Francisco"}),
        ("search", {"query": "WebNav benchmark", "topn": 10, "source": "web"}),
    ),
    p(
        "dsml-sglang-json-body",
        "dsml",
        f"{SGLANG_PARSER} TestDeepSeekV32Detector::test_detect_and_parse_json_format",
        SGLANG_DSML_TOOLS,
        "I'll help you with information about San Francisco and get its favorite tourist spot "
        "for you.\n\n        <｜DSML｜function_calls>\n"
        '            <｜DSML｜invoke name="get_favorite_tourist_spot">\n            {\n'
        '                "city": "San Francisco"\n            }\n        </｜DSML｜invoke>\n'
        '            <｜DSML｜invoke name="search">\n            {\n'
        '                "query": "WebNav benchmark",\n                "topn": 10,\n'
        '                "source": "web"\n            }\n        </｜DSML｜invoke>\n'
        "        </｜DSML｜function_calls>\n        ",
        ("get_favorite_tourist_spot", {"city": "San Francisco"}),
        ("search", {"query": "WebNav benchmark", "topn": 10, "source": "web"}),
    ),
    p(
        "dsml-sglang-streaming-xml",
        "dsml",
        f"{SGLANG_PARSER} TestDeepSeekV32Detector::test_streaming_xml_format",
        SGLANG_DSML_TOOLS,
        "<｜DSML｜function_calls>\n"
        '            <｜DSML｜invoke name="get_favorite_tourist_spot">\n'
        '                <｜DSML｜parameter name="city" string="true">San Francisco</｜DSML｜parameter>\n'
        '                <｜DSML｜parameter name="another_city" string="true">London</｜DSML｜parameter>\n'
        '                <｜DSML｜parameter name="topn" string="false">10</｜DSML｜parameter>\n'
        '                <｜DSML｜parameter name="obj" string="false">{"name": "John", "age": 30}'
        "</｜DSML｜parameter>\n            </｜DSML｜invoke>\n        </｜DSML｜function_calls>",
        (
            "get_favorite_tourist_spot",
            {
                "city": "San Francisco",
                "another_city": "London",
                "topn": 10,
                "obj": {"name": "John", "age": 30},
            },
        ),
    ),
    p(
        "dsml-sglang-streaming-json",
        "dsml",
        f"{SGLANG_PARSER} TestDeepSeekV32Detector::test_streaming_json_format",
        SGLANG_DSML_TOOLS,
        "<｜DSML｜function_calls>\n"
        '            <｜DSML｜invoke name="get_favorite_tourist_spot">\n            {\n'
        '                "city": "San Francisco",\n                "another_city": "London",\n'
        '                "topn": 10,\n                "obj": {\n                    "name": "John",\n'
        '                    "age": 30\n                }\n            }\n'
        "            </｜DSML｜invoke>\n        </｜DSML｜function_calls>",
        (
            "get_favorite_tourist_spot",
            {
                "city": "San Francisco",
                "another_city": "London",
                "topn": 10,
                "obj": {"name": "John", "age": 30},
            },
        ),
    ),
    p(
        "dsml-sglang-no-parameters",
        "dsml",
        f"{SGLANG_PARSER} TestDeepSeekV32Detector::test_detect_and_parse_no_parameters",
        SGLANG_DSML_TOOLS,
        "Let me get the current date for you.\n\n<｜DSML｜function_calls>\n"
        '<｜DSML｜invoke name="get_date">\n</｜DSML｜invoke>\n</｜DSML｜function_calls>',
        ("get_date", {}),
    ),
    p(
        "dsml-sglang-whitespace-body",
        "dsml",
        f"{SGLANG_PARSER} TestDeepSeekV32Detector::test_streaming_no_parameters_with_whitespace",
        SGLANG_DSML_TOOLS,
        '<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_date">\n\n</｜DSML｜invoke>\n'
        "</｜DSML｜function_calls>",
        ("get_date", {}),
    ),
    p(
        "dsml-sglang-json-param",
        "dsml",
        f"{SGLANG_DSV32} TestJsonParamStreamingUnchanged::test_json_object_param_still_streams",
        SGLANG_DSML_TOOLS,
        '<｜DSML｜function_calls>\n<｜DSML｜invoke name="write_note">\n'
        '<｜DSML｜parameter name="payload" string="false">{"city": "San Francisco"}'
        "</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>",
        ("write_note", {"payload": {"city": "San Francisco"}}),
    ),
    p(
        "dsml-sglang-v4-tool-calls",
        "dsml",
        f"{SGLANG_DSV32} TestNonJsonObjectParamStreaming::test_v4_tool_calls_tokens",
        (spec("write_note", payload=STR),),
        '<｜DSML｜tool_calls>\n<｜DSML｜invoke name="write_note">\n'
        '<｜DSML｜parameter name="payload" string="false">Здравствуйте, мир! Это тест'
        "</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>",
        ("write_note", {"payload": "Здравствуйте, мир! Это тест"}),
    ),
    p(
        "dsml-vllm-no-params",
        "dsml",
        f"{VLLM_DSV32} TestExtractToolCalls::test_single_tool_no_params",
        VLLM_DSML_TOOLS,
        f'{FC}\n{INV}get_time">\n{INV_END}\n{FC_END}',
        ("get_time", {}),
    ),
    p(
        "dsml-vllm-with-params",
        "dsml",
        f"{VLLM_DSV32} TestExtractToolCalls::test_single_tool_with_params",
        VLLM_DSML_TOOLS,
        dsml("get_weather", ("location", "true", "SF"), ("date", "true", "2024-01-16")),
        ("get_weather", {"location": "SF", "date": "2024-01-16"}),
    ),
    p(
        "dsml-vllm-content-before",
        "dsml",
        f"{VLLM_DSV32} TestExtractToolCalls::test_content_before_tool_call",
        VLLM_DSML_TOOLS,
        "Sure, let me check! " + dsml("get_weather", ("location", "true", "NYC")),
        ("get_weather", {"location": "NYC"}),
    ),
    p(
        "dsml-vllm-two",
        "dsml",
        f"{VLLM_DSV32} TestExtractToolCalls::test_multiple_tools",
        VLLM_DSML_TOOLS,
        f'{FC}\n{INV}get_weather">\n{PAR}location" string="true">SF{PAR_END}\n{INV_END}\n'
        f'{INV}get_weather">\n{PAR}location" string="true">NYC{PAR_END}\n{INV_END}\n{FC_END}',
        ("get_weather", {"location": "SF"}),
        ("get_weather", {"location": "NYC"}),
    ),
    p(
        "dsml-vllm-types",
        "dsml",
        f"{VLLM_DSV32} TestExtractToolCalls::test_type_conversion_in_non_streaming",
        VLLM_DSML_TOOLS,
        dsml("toggle", ("enabled", "false", "true"), ("count", "false", "42")),
        ("toggle", {"enabled": True, "count": 42}),
    ),
    p(
        "dsml-vllm-string-true-coerced",
        "dsml",
        f"{VLLM_DSV32} TestExtractToolCalls::test_string_attr_true_coerced_by_schema",
        VLLM_DSML_TOOLS,
        dsml("score", ("value", "true", "42")),
        ("score", {"value": 42}),
    ),
    p(
        "dsml-vllm-composed-schema",
        "dsml",
        f"{VLLM_DSV32} TestExtractToolCalls::test_composed_schema_converts_object_and_array_params",
        VLLM_DSML_TOOLS,
        dsml(
            "set_timer",
            ("wait", "false", '{"type":"for","minutes":2880}'),
            ("patches", "false", '[{"op":"replace","path":"/schedule","value":"quiet"}]'),
        ),
        (
            "set_timer",
            {
                "wait": {"type": "for", "minutes": 2880},
                "patches": [{"op": "replace", "path": "/schedule", "value": "quiet"}],
            },
        ),
    ),
    p(
        "dsml-vllm-arguments-wrapper",
        "dsml",
        f"{VLLM_DSV32} TestExtractToolCalls::test_arguments_wrapper_repaired",
        VLLM_DSML_TOOLS,
        dsml("get_weather", ("arguments", "false", '{"location":"Beijing"}')),
        ("get_weather", {"location": "Beijing"}),
    ),
    p(
        "dsml-vllm-input-wrapper",
        "dsml",
        f"{VLLM_DSV32} TestExtractToolCalls::test_input_wrapper_repaired",
        VLLM_DSML_TOOLS,
        dsml("get_weather", ("input", "true", '{"location":"Beijing"}')),
        ("get_weather", {"location": "Beijing"}),
    ),
    p(
        "dsml-vllm-object-array",
        "dsml",
        f"{VLLM_DSV32} TestExtractToolCalls::test_object_and_array_params",
        VLLM_DSML_TOOLS,
        dsml("update", ("tags", "false", '["a", "b"]'), ("meta", "false", '{"k": 1}')),
        ("update", {"tags": ["a", "b"], "meta": {"k": 1}}),
    ),
    p(
        "dsml-vllm-multi-typed",
        "dsml",
        f"{VLLM_DSV32} TestExtractToolCalls::test_multi_typed_schema",
        VLLM_DSML_TOOLS,
        dsml("set_val", ("count", "false", "42"), ("label", "false", "hello")),
        ("set_val", {"count": 42, "label": "hello"}),
    ),
    p(
        "dsml-vllm-null",
        "dsml",
        f"{VLLM_DSV32} TestExtractToolCalls::test_multi_typed_null_value",
        VLLM_DSML_TOOLS,
        dsml("clear", ("value", "false", "null")),
        ("clear", {"value": None}),
    ),
    p(
        "dsml-vllm-null-string",
        "dsml",
        f"{VLLM_DSV32} TestExtractToolCalls::test_null_coerced_back_to_string_by_schema",
        VLLM_DSML_TOOLS,
        dsml("echo", ("text", "false", "null")),
        ("echo", {"text": "null"}),
    ),
    p(
        "dsml-vllm-plain",
        "dsml",
        f"{VLLM_DSV32} TestExtractToolCalls::test_no_tool_call",
        VLLM_DSML_TOOLS,
        "just some text",
    ),
]

# -- Step-3 ------------------------------------------------------------------------------------

VLLM_STEP3 = "vllm-project/vllm tests/tool_parsers/test_step3_tool_parser.py"
STEP3_TOOLS = (
    spec("get_weather", "city"),
    spec("get_time", "timezone"),
    spec("refresh"),
    spec("test_function", quoted=STR, path=STR, newline=STR),
    spec("edit_file", old_string=STR, indent=INT, enabled=BOOL),
    spec("func"),
)
SB, SE = "<｜tool_calls_begin｜><｜tool_call_begin｜>", "<｜tool_call_end｜><｜tool_calls_end｜>"


def step3_edit(value: str) -> str:
    return (
        f"{SB}function<｜tool_sep｜>edit_file\n"
        '<steptml:invoke name="edit_file">'
        f'<steptml:parameter name="old_string">{value}</steptml:parameter>'
        '<steptml:parameter name="indent"> 4 </steptml:parameter>'
        '<steptml:parameter name="enabled"> true </steptml:parameter>'
        f"</steptml:invoke>{SE}"
    )


STEP3 = [
    p(
        "step3-single",
        "step3",
        f"{VLLM_STEP3} TestStep3ToolParser single_tool_call_output",
        STEP3_TOOLS,
        f'{SB}<steptml:invoke name="get_weather"><steptml:parameter name="city">Tokyo'
        f"</steptml:parameter></steptml:invoke>{SE}",
        ("get_weather", {"city": "Tokyo"}),
    ),
    p(
        "step3-parallel",
        "step3",
        f"{VLLM_STEP3} TestStep3ToolParser parallel_tool_calls_output",
        STEP3_TOOLS,
        f'{SB}<steptml:invoke name="get_weather"><steptml:parameter name="city">Tokyo'
        "</steptml:parameter></steptml:invoke><｜tool_call_end｜><｜tool_sep｜>"
        '<｜tool_call_begin｜><steptml:invoke name="get_time">'
        '<steptml:parameter name="timezone">Asia/Tokyo</steptml:parameter>'
        f"</steptml:invoke>{SE}",
        ("get_weather", {"city": "Tokyo"}),
        ("get_time", {"timezone": "Asia/Tokyo"}),
    ),
    p(
        "step3-empty",
        "step3",
        f"{VLLM_STEP3} TestStep3ToolParser empty_arguments_output",
        STEP3_TOOLS,
        f'{SB}<steptml:invoke name="refresh"></steptml:invoke>{SE}',
        ("refresh", {}),
    ),
    p(
        "step3-surrounding-text",
        "step3",
        f"{VLLM_STEP3} TestStep3ToolParser surrounding_text_output",
        STEP3_TOOLS,
        f'Let me check the weather for you.\n\n{SB}<steptml:invoke name="get_weather">'
        f'<steptml:parameter name="city">Tokyo</steptml:parameter></steptml:invoke>{SE}\n\n'
        "I'll get that information.",
        ("get_weather", {"city": "Tokyo"}),
    ),
    p(
        "step3-escaped-strings",
        "step3",
        f"{VLLM_STEP3} TestStep3ToolParser escaped_strings_output",
        STEP3_TOOLS,
        f'{SB}<steptml:invoke name="test_function">'
        '<steptml:parameter name="quoted">He said "hello"</steptml:parameter>'
        '<steptml:parameter name="path">C:\\Users\\file.txt</steptml:parameter>'
        '<steptml:parameter name="newline">line1\nline2</steptml:parameter>'
        f"</steptml:invoke>{SE}",
        (
            "test_function",
            {"quoted": 'He said "hello"', "path": "C:\\Users\\file.txt", "newline": "line1\nline2"},
        ),
    ),
    p(
        "step3-malformed",
        "step3",
        f"{VLLM_STEP3} TestStep3ToolParser malformed_input_outputs[0]",
        STEP3_TOOLS,
        '<｜tool_calls_begin｜><｜tool_call_begin｜><steptml:invoke name="func">',
    ),
    p(
        "step3-plain",
        "step3",
        f"{VLLM_STEP3} TestStep3ToolParser no_tool_calls_output",
        STEP3_TOOLS,
        "This is a regular response without any tool calls.",
    ),
    *(
        p(
            f"step3-whitespace-{k}",
            "step3",
            f"{VLLM_STEP3} TestStep3ParameterWhitespace::test_string_value_preserved[{k}]",
            STEP3_TOOLS,
            step3_edit(value),
            ("edit_file", {"old_string": value, "indent": 4, "enabled": True}),
        )
        for k, value in enumerate(
            [
                "    if x:",
                "return 1\n",
                "    if x:\n        return 1\n",
                "hello ",
                "hello\u00a0",
                "hello",
            ]
        )
    ),
]

# -- Apertus -----------------------------------------------------------------------------------

VLLM_APERTUS = (
    "vllm-project/vllm tests/tool_parsers/test_apertus_tool_parser.py TestExtractToolCalls"
)
OLLAMA_APERTUS = "ollama/ollama model/parsers/apertus15_test.go"
OLLAMA_TOOLS_TEST = "ollama/ollama tools/tools_test.go"
APERTUS_TOOLS = (
    spec("get_weather", location=STR, unit=STR, city=STR),
    spec("get_time", location=STR, offset=INT, dst=BOOL),
    spec("complex_function", nested=OBJ, list=ARR),
    spec("lookup", id=STR),
    spec("first", x=INT),
    spec("second", y=INT),
    spec("one"),
    spec("two"),
    spec("get_temperature", format=STR, location=STR),
)
TP, TS = "<|tools_prefix|>", "<|tools_suffix|>"

APERTUS = [
    p(
        "apertus-single",
        "apertus",
        f"{VLLM_APERTUS}::test_single_tool_call",
        APERTUS_TOOLS,
        f'{TP}[{{"get_weather": {{"location": "London"}}}}]{TS}',
        ("get_weather", {"location": "London"}),
    ),
    p(
        "apertus-multiple-args",
        "apertus",
        f"{VLLM_APERTUS}::test_multiple_arguments",
        APERTUS_TOOLS,
        f'{TP}[{{"get_weather": {{"location": "San Francisco", "unit": "celsius"}}}}]{TS}',
        ("get_weather", {"location": "San Francisco", "unit": "celsius"}),
    ),
    p(
        "apertus-text-before",
        "apertus",
        f"{VLLM_APERTUS}::test_text_before_tool_call",
        APERTUS_TOOLS,
        f'Let me check the weather for you. {TP}[{{"get_weather": {{"location": "Paris"}}}}]{TS}',
        ("get_weather", {"location": "Paris"}),
    ),
    p(
        "apertus-two",
        "apertus",
        f"{VLLM_APERTUS}::test_multiple_tool_calls",
        APERTUS_TOOLS,
        f'{TP}[{{"get_weather": {{"location": "London"}}}}, {{"get_time": {{"location": "London"}}}}]{TS}',
        ("get_weather", {"location": "London"}),
        ("get_time", {"location": "London"}),
    ),
    p(
        "apertus-nested",
        "apertus",
        f"{VLLM_APERTUS}::test_nested_arguments",
        APERTUS_TOOLS,
        f'{TP}[{{"complex_function": {{"nested": {{"inner": "value"}}, "list": ["a", "b"]}}}}]{TS}',
        ("complex_function", {"nested": {"inner": "value"}, "list": ["a", "b"]}),
    ),
    p(
        "apertus-incomplete",
        "apertus",
        f"{VLLM_APERTUS}::test_incomplete_tool_call",
        APERTUS_TOOLS,
        f'{TP}[{{"get_weather": {{"location": "London"}}',
        ("get_weather", {"location": "London"}),
    ),
    p(
        "apertus-missing-suffix",
        "apertus",
        f"{VLLM_APERTUS}::test_missing_tool_suffix",
        APERTUS_TOOLS,
        f'{TP}[{{"get_weather": {{"location": "San Francisco", "unit": "celsius"}}}}]',
        ("get_weather", {"location": "San Francisco", "unit": "celsius"}),
    ),
    p(
        "apertus-plain",
        "apertus",
        f"{VLLM_APERTUS}::test_no_tool_calls",
        APERTUS_TOOLS,
        "Hello, how can I help you today?",
    ),
    p(
        "apertus-ollama-two",
        "apertus",
        f"{OLLAMA_APERTUS} TestApertus15ParserToolCalls",
        APERTUS_TOOLS,
        f'I will check.{TP}[{{"get_weather":{{"city":"Zurich"}}}},{{"get_time":{{"offset":2,"dst":true}}}}]{TS}',
        ("get_weather", {"city": "Zurich"}),
        ("get_time", {"offset": 2, "dst": True}),
    ),
    p(
        "apertus-ollama-consumed-suffix",
        "apertus",
        f"{OLLAMA_APERTUS} TestApertus15ParserAcceptsConsumedToolSuffix",
        APERTUS_TOOLS,
        f'{TP}[{{"lookup":{{"id":"42"}}}}]',
        ("lookup", {"id": "42"}),
    ),
    p(
        "apertus-ollama-envelopes",
        "apertus",
        f"{OLLAMA_APERTUS} TestApertus15ParserMultipleToolEnvelopesWithContent",
        APERTUS_TOOLS,
        f'Before.{TP}[{{"first":{{"x":1}}}}]{TS}Between.{TP}[{{"second":{{"y":2}}}}]{TS}After.',
        ("first", {"x": 1}),
        ("second", {"y": 2}),
    ),
    p(
        "apertus-ollama-reasoning",
        "apertus",
        f"{OLLAMA_APERTUS} TestApertus15ParserContentAndThinking",
        APERTUS_TOOLS,
        "<|assistant_start|>Before.<|inner_prefix|>Reason carefully.<|inner_suffix|>After."
        "<|assistant_end|>",
        reasoning="Reason carefully.",
    ),
    *(
        p(
            f"apertus-ollama-malformed-{k}",
            "apertus",
            f"{OLLAMA_APERTUS} TestApertus15ParserRejectsMalformedToolCalls[{k}]",
            APERTUS_TOOLS,
            f"{TP}{body}{TS}",
        )
        for k, body in enumerate(
            [
                '[{"lookup":',
                '[{"one":{},"two":{}}]',
                '[{"lookup":"not-an-object"}]',
                '[{"lookup":[1,2]}]',
                '[{"lookup":null}]',
            ]
        )
    ),
    p(
        "apertus-bare-keyed",
        "apertus",
        f"{OLLAMA_TOOLS_TEST} TestFindArguments/simple tool call",
        APERTUS_TOOLS,
        '{"get_temperature": {"format": "fahrenheit", "location": "San Francisco, CA"}}',
        ("get_temperature", {"format": "fahrenheit", "location": "San Francisco, CA"}),
    ),
    p(
        "apertus-bare-keyed-string",
        "apertus",
        f"{OLLAMA_TOOLS_TEST} TestFindArguments/stringified simple tool call",
        APERTUS_TOOLS,
        '{"get_temperature": "{\\"format\\": \\"fahrenheit\\", \\"location\\": \\"San Francisco, CA\\"}"}',
        ("get_temperature", {"format": "fahrenheit", "location": "San Francisco, CA"}),
    ),
]

# -- Llama 3.1 built-in tools, Functionary v3.2, DeepSeek-R1 (llama.cpp) ------------------------

LLAMA_BUILTIN = [
    p(
        "llama31-code-interpreter",
        "llama_builtin",
        f"{LLAMA_CPP} Llama-3.3-70B-Instruct: message_assist_call_code_interpreter",
        SPECIAL,
        "<|python_tag|>code_interpreter.call(code=\"print('hey')\")",
        ("code_interpreter", {"code": "print('hey')"}),
    ),
    p(
        "llama31-python",
        "llama_builtin",
        f"{LLAMA_CPP} Llama-3.3-70B-Instruct: message_assist_call_python",
        SPECIAL,
        "<|python_tag|>python.call(code=\"print('hey')\")",
        ("python", {"code": "print('hey')"}),
    ),
    p(
        "llama31-json",
        "llama_builtin",
        f"{LLAMA_CPP} Llama-3.3-70B-Instruct: message_assist_call",
        SPECIAL,
        '{"name": "special_function", "parameters": {"arg1": 1}}',
        ("special_function", {"arg1": 1}),
    ),
]

FUNCTIONARY = [
    p(
        "functionary-call",
        "functionary_v32",
        f"{LLAMA_CPP} meetkai-functionary-medium-v3.2 peg_tester: >>>special_function",
        SPECIAL,
        '>>>special_function\n{"arg1": 1}',
        ("special_function", {"arg1": 1}),
    ),
    p(
        "functionary-all",
        "functionary_v32",
        f"{LLAMA_CPP} meetkai-functionary-medium-v3.2 peg_tester: >>>all",
        SPECIAL,
        ">>>all\nHello, world!\nWhat's up?",
    ),
    p(
        "functionary-after-text-same-line",
        "functionary_v32",
        f"{LLAMA_CPP} meetkai-functionary-medium-v3.2: all + text, then >>>special_function",
        SPECIAL,
        'all\nHello, world!\nnono\nWhat\'s up?>>>special_function\n{"arg1": 1}\n',
        ("special_function", {"arg1": 1}),
    ),
    p(
        "functionary-after-text-new-line",
        "functionary_v32",
        f"{LLAMA_CPP} (older) meetkai-functionary-medium-v3.2: all + text, newline, >>>",
        SPECIAL,
        'all\nHello, world!\nnono\nWhat\'s up?\n>>>special_function\n{"arg1": 1}\n',
        ("special_function", {"arg1": 1}),
    ),
    p(
        "functionary-trailing-space",
        "functionary_v32",
        f"{LLAMA_CPP} (older) test_parse_tool_call FunctionaryV3Llama3",
        SPECIAL,
        '>>>special_function\n{"arg1": 1}\n ',
        ("special_function", {"arg1": 1}),
    ),
    p(
        "functionary-python-lines",
        "functionary_v32",
        f"{LLAMA_CPP} meetkai-functionary-medium-v3.2: message_assist_call_python_lines",
        SPECIAL,
        "python\n# This is a program:\nprint('hey')",
        ("python", {"code": "# This is a program:\nprint('hey')"}),
    ),
]

DEEPSEEK_R1 = [
    p(
        "deepseek-r1-short-opener",
        "deepseek",
        f"{LLAMA_CPP} DeepSeek-R1: <｜tool▁calls｜> opener",
        SPECIAL,
        '<｜tool▁calls｜>function<｜tool▁sep｜>special_function\n```json\n{"arg1": 1}\n```'
        "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
        ("special_function", {"arg1": 1}),
    ),
    p(
        "deepseek-r1-with-thoughts",
        "deepseek",
        f"{LLAMA_CPP} DeepSeek-R1: message_assist_call_thoughts",
        SPECIAL,
        "<think>I'm\nthinking</think>\n\n<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function"
        '<｜tool▁sep｜>special_function\n```json\n{"arg1": 1}\n```<｜tool▁call▁end｜>'
        "<｜tool▁calls▁end｜>",
        ("special_function", {"arg1": 1}),
        reasoning="I'm\nthinking",
    ),
    p(
        "deepseek-ascii-pipes",
        "deepseek",
        f"{OLLAMA_TOOLS_TEST} TestFindArguments/deepseek",
        APERTUS_TOOLS,
        "<|tool▁calls▁begin|><|tool▁call▁begin|>function<|tool▁sep|>get_temperature\n```json\n"
        '{"location": "Tokyo"}\n```<|tool▁call▁end|><|tool▁calls▁end|><|end▁of▁sentence|>',
        ("get_temperature", {"location": "Tokyo"}),
    ),
]

# -- Seed-OSS (vLLM) ---------------------------------------------------------------------------

VLLM_SEED = (
    "vllm-project/vllm tests/tool_parsers/test_seed_oss_tool_parser.py test_extract_tool_calls"
)
SEED_TOOLS = (spec("get_weather", "location", unit=STR),)
BARCELONA: Call = ("get_weather", {"location": "Barcelona, Spain"})
SEED_512 = (
    "<seed:think>The user's current thinking budget is 512.</seed:cot_budget_reflect>\nLet me analyze "
    "the question. The user wants to know the weather in Barcelona, Spain. Looking at the functions "
    "available, there's a get_weather function that can retrieve the current temperature for a given "
    "location. \n\nFirst, check the parameters required by get_weather: location is mandatory (needs "
    'city and country), and unit is optional. The user provided "Barcelona Spain" as the location, '
    "which fits the required format (city, country). \n<seed:cot_budget_reflect>I have used 131 "
    "tokens, and there are 381 tokens remaining for use.</seed:cot_budget_reflect>\n Since the unit "
    "isn't specified, the function will default to Celsius, which is fine. \n\nThere's no need to ask "
    "for more information because the location is clear. So I should call the get_weather function "
    'with location set to "Barcelona, Spain" (adding a comma for clarity, though the user\'s input '
    "has a space, but the function might accept either; to be safe, using the standard format with a "
    "comma).\n<seed:cot_budget_reflect>I have used 257 tokens, and there are 255 tokens remaining for "
    "use.</seed:cot_budget_reflect>\n The unit parameter can be omitted since it's optional."
    "</seed:think>\n"
)
SEED_UNLIMITED = (
    "<seed:think>\nGot it, let's see. The user asked for the weather in Barcelona, Spain. First, I "
    "need to remember the function I can use: get_weather. The function requires a location (city "
    'and country) which is "Barcelona, Spain" here, and unit is optional. Since the user didn\'t '
    "specify the unit, the default in the function is Celsius, right? Wait, let me check the function "
    "docstring again. Oh, the function says unit is optional, and returns temperature in Celsius. So I "
    'should call get_weather with location "Barcelona, Spain" and maybe omit unit or set to Celsius. '
    "Let me format the function call correctly. The format is <seed:tool_call>\n<function=get_weather>"
    "\n<parameter=location>Barcelona, Spain</parameter>\n<parameter=unit>celsius</parameter>\n"
    '</function>\n</seed:tool_call>. Wait, but does the unit parameter accept "celsius"? The '
    "docstring says unit is the unit of temperature, but the return is in Celsius anyway. Maybe even "
    "if I don't pass unit, it's okay, but to be explicit, maybe pass \"celsius\". Let me go with that. "
    "So the function call should be as above. Then wait for the result to come back and tell the user "
    "the temperature in Celsius.</seed:think>"
)
SEED_CALL = (
    "<seed:tool_call>\n<function=get_weather>\n<parameter=location>Barcelona, Spain</parameter>\n"
    "</function>\n</seed:tool_call>"
)

SEED_OSS = [
    p(
        "seed-0-budget",
        "seed_oss",
        f"{VLLM_SEED}[tool_call_0_thinking_budget]",
        SEED_TOOLS,
        SEED_CALL,
        BARCELONA,
    ),
    p(
        "seed-512-budget",
        "seed_oss",
        f"{VLLM_SEED}[tool_call_512_thinkg_budget]",
        SEED_TOOLS,
        SEED_512 + SEED_CALL,
        BARCELONA,
    ),
    p(
        "seed-unlimited",
        "seed_oss",
        f"{VLLM_SEED}[tool_call_unlimited_thinking_budget]",
        SEED_TOOLS,
        SEED_UNLIMITED
        + "<seed:tool_call>\n<function=get_weather>\n<parameter=location>Barcelona, Spain"
        "</parameter>\n<parameter=unit>celsius</parameter>\n</function>\n</seed:tool_call>",
        ("get_weather", {"location": "Barcelona, Spain", "unit": "celsius"}),
    ),
    p(
        "seed-plain",
        "seed_oss",
        "vllm-project/vllm tests/tool_parsers/test_seed_oss_tool_parser.py test_extract_tool_calls_no_tools",
        SEED_TOOLS,
        "This is a test response without any tool calls",
    ),
]

# -- Cohere Command (vLLM, Ollama) -------------------------------------------------------------

VLLM_COHERE = "vllm-project/vllm tests/tool_parsers/test_cohere_command_tool_parser.py"
OLLAMA_COMMANDR = "ollama/ollama model/parsers/commandr_test.go"
COHERE_TOOLS = (
    spec("foo", "query"),
    spec("bar", x=INT),
    spec("get_weather", "location", unit=STR),
    spec("get_time", "timezone"),
    spec("bash", "command"),
    spec("read_file", "path"),
)
COHERE = [
    p(
        "cohere-single",
        "cohere",
        f"{VLLM_COHERE} TOOL_CALL_CASES[cmd3-single_tool_call]",
        COHERE_TOOLS,
        "<|START_THINKING|> i will call foo with query1<|END_THINKING|><|START_ACTION|>\n[\n"
        '    {"tool_call_id": "0", "tool_name": "foo", "parameters": {"query": "query1"}}\n]\n'
        "<|END_ACTION|>",
        ("foo", {"query": "query1"}),
        reasoning="i will call foo with query1",
    ),
    p(
        "cohere-two",
        "cohere",
        f"{VLLM_COHERE} TOOL_CALL_CASES[cmd3-multiple_tool_calls]",
        COHERE_TOOLS,
        "<|START_THINKING|>first I think about foo<|END_THINKING|><|START_ACTION|>\n[\n"
        '    {"tool_call_id": "0", "tool_name": "foo", "parameters": {"query": "query1"}},\n'
        '    {"tool_call_id": "1", "tool_name": "bar", "parameters": {"x": 42}}\n]\n<|END_ACTION|>',
        ("foo", {"query": "query1"}),
        ("bar", {"x": 42}),
        reasoning="first I think about foo",
    ),
    p(
        "cohere-citations",
        "cohere",
        f"{VLLM_COHERE} TOOL_CALL_CASES[cmd3-citations_no_tool_calls]",
        COHERE_TOOLS,
        "<|START_THINKING|>This is a rainbow <co>emoji: 🌈</co: 0:[1]><|END_THINKING|>\n"
        "<|START_RESPONSE|>foo <co>bar</co: 0:[1,2],1:[3,4]><|END_RESPONSE|>",
    ),
    p(
        "cohere-reasoning-only",
        "cohere",
        f"{VLLM_COHERE} TOOL_CALL_CASES[cmd3-reasoning_only]",
        COHERE_TOOLS,
        "<|START_THINKING|>just think, no response<|END_THINKING|>",
        reasoning="just think, no response",
    ),
    p(
        "commandr-single",
        "cohere",
        f"{OLLAMA_COMMANDR} TestCommandRParser_SingleToolCall (chunks joined)",
        COHERE_TOOLS,
        'Action: ```json\n[\n    {\n        "tool_name": "get_weather",\n        "parameters": '
        '{"location": "San Francisco", "unit": "celsius"}\n    }\n]\n```',
        ("get_weather", {"location": "San Francisco", "unit": "celsius"}),
    ),
    p(
        "commandr-two",
        "cohere",
        f"{OLLAMA_COMMANDR} TestCommandRParser_MultipleToolCalls",
        COHERE_TOOLS,
        'Action: ```json\n[\n    {\n        "tool_name": "get_weather",\n        "parameters": '
        '{"location": "New York"}\n    },\n    {\n        "tool_name": "get_time",\n        '
        '"parameters": {"timezone": "EST"}\n    }\n]\n```',
        ("get_weather", {"location": "New York"}),
        ("get_time", {"timezone": "EST"}),
    ),
    p(
        "commandr-directly-answer",
        "cohere",
        f"{OLLAMA_COMMANDR} TestCommandRParser_DirectlyAnswer",
        COHERE_TOOLS,
        'Action: ```json\n[\n    {\n        "tool_name": "directly-answer",\n        "parameters": '
        "{}\n    }\n]\n```",
    ),
    p(
        "commandr-content-before",
        "cohere",
        f"{OLLAMA_COMMANDR} TestCommandRParser_ContentBeforeAction (chunks joined)",
        COHERE_TOOLS,
        "I'll look up the weather for you.\nAction: ```json\n"
        '[{"tool_name": "get_weather", "parameters": {"location": "NYC"}}]\n```',
        ("get_weather", {"location": "NYC"}),
    ),
    p(
        "commandr-streaming",
        "cohere",
        f"{OLLAMA_COMMANDR} TestCommandRParser_StreamingTokenByToken (tokens joined)",
        COHERE_TOOLS,
        'Action: ```json\n[\n    {\n        "tool_name": "bash",\n        "parameters": '
        '{"command": "ls -la"}\n    }\n]\n```',
        ("bash", {"command": "ls -la"}),
    ),
    p(
        "commandr-no-closing-fence",
        "cohere",
        f"{OLLAMA_COMMANDR} TestCommandRParser_DoneWithPendingToolCalls",
        COHERE_TOOLS,
        'Action: ```json\n[{"tool_name": "bash", "parameters": {"command": "pwd"}}]',
        ("bash", {"command": "pwd"}),
    ),
    p(
        "commandr-single-object",
        "cohere",
        f"{OLLAMA_COMMANDR} TestCommandRParser_SingleObject",
        COHERE_TOOLS,
        'Action: ```json\n{\n    "tool_name": "read_file",\n    "parameters": {"path": "/etc/hosts"}\n}\n```',
        ("read_file", {"path": "/etc/hosts"}),
    ),
    p(
        "commandr-plain",
        "cohere",
        f"{OLLAMA_COMMANDR} TestCommandRParser_PlainTextResponse",
        COHERE_TOOLS,
        "Hello! How can I help you today?",
    ),
]

# -- Llama 3 JSON (vLLM) -----------------------------------------------------------------------

VLLM_LLAMA3 = "vllm-project/vllm tests/tool_parsers/test_llama3_json_tool_parser.py"
LLAMA3_TOOLS = (
    spec("getOpenIncidentsTool"),
    spec("searchTool", "query", limit=INT, nested=OBJ),
    spec("complexTool", level1=OBJ, config=OBJ),
    spec("simpleTool", value=STR),
    spec("parserTool", text=STR),
    spec("invalidTool"),
    spec("toolWithoutParams"),
)
SEARCH_TEST: Call = ("searchTool", {"query": "test"})

LLAMA3_JSON = [
    p(
        "llama3-simple-prose",
        "llama3_json",
        f"{VLLM_LLAMA3} test_extract_tool_calls_simple",
        LLAMA3_TOOLS,
        'Here is the result: {"name": "getOpenIncidentsTool", "parameters": {}} Would you like '
        "to know more?",
        ("getOpenIncidentsTool", {}),
    ),
    p(
        "llama3-with-arguments",
        "llama3_json",
        f"{VLLM_LLAMA3} test_extract_tool_calls_with_arguments",
        LLAMA3_TOOLS,
        '{"name": "searchTool", "parameters": {"query": "test query", "limit": 10}}',
        ("searchTool", {"query": "test query", "limit": 10}),
    ),
    p(
        "llama3-no-json",
        "llama3_json",
        f"{VLLM_LLAMA3} test_extract_tool_calls_no_json",
        LLAMA3_TOOLS,
        "This is just some text without any tool calls",
    ),
    p(
        "llama3-invalid-json",
        "llama3_json",
        f"{VLLM_LLAMA3} test_extract_tool_calls_invalid_json",
        LLAMA3_TOOLS,
        '{"name": "invalidTool", "parameters": {invalid json}',
    ),
    p(
        "llama3-arguments-key",
        "llama3_json",
        f"{VLLM_LLAMA3} test_extract_tool_calls_with_arguments_key",
        LLAMA3_TOOLS,
        '{"name": "searchTool", "arguments": {"query": "test"}}',
        SEARCH_TEST,
    ),
    p(
        "llama3-semicolons",
        "llama3_json",
        f"{VLLM_LLAMA3} test_extract_tool_calls_multiple_json",
        LLAMA3_TOOLS,
        '{"name": "searchTool", "parameters": {"query": "test1"}}; '
        '{"name": "getOpenIncidentsTool", "parameters": {}}; '
        '{"name": "searchTool", "parameters": {"query": "test2"}}',
        ("searchTool", {"query": "test1"}),
        ("getOpenIncidentsTool", {}),
        ("searchTool", {"query": "test2"}),
    ),
    p(
        "llama3-semicolons-spaced",
        "llama3_json",
        f"{VLLM_LLAMA3} test_extract_tool_calls_multiple_json_with_whitespace",
        LLAMA3_TOOLS,
        '{"name": "searchTool", "parameters": {"query": "test1"}} ; '
        '{"name": "getOpenIncidentsTool", "parameters": {}} ; '
        '{"name": "searchTool", "parameters": {"query": "test2"}}',
        ("searchTool", {"query": "test1"}),
        ("getOpenIncidentsTool", {}),
        ("searchTool", {"query": "test2"}),
    ),
    p(
        "llama3-surrounding-text",
        "llama3_json",
        f"{VLLM_LLAMA3} test_extract_tool_calls_multiple_json_with_surrounding_text",
        LLAMA3_TOOLS,
        "Here are the results: "
        '{"name": "searchTool", "parameters": {"query": "test1"}}; '
        '{"name": "getOpenIncidentsTool", "parameters": {}}; '
        '{"name": "searchTool", "parameters": {"query": "test2"}} '
        "Would you like to know more?",
        ("searchTool", {"query": "test1"}),
        ("getOpenIncidentsTool", {}),
        ("searchTool", {"query": "test2"}),
    ),
    p(
        "llama3-deep",
        "llama3_json",
        f"{VLLM_LLAMA3} test_extract_tool_calls_deeply_nested_json",
        LLAMA3_TOOLS,
        '{"name": "complexTool", "parameters": {"level1": {"level2": {"level3": {"level4": '
        '{"value": "deep"}}}}}}',
        ("complexTool", {"level1": {"level2": {"level3": {"level4": {"value": "deep"}}}}}),
    ),
    p(
        "llama3-deep-two",
        "llama3_json",
        f"{VLLM_LLAMA3} test_extract_tool_calls_multiple_with_deep_nesting",
        LLAMA3_TOOLS,
        '{"name": "simpleTool", "parameters": {"value": "test"}}; '
        '{"name": "complexTool", "parameters": '
        '{"config": {"database": {"connection": {"pool": {"size": 10}}}}}}',
        ("simpleTool", {"value": "test"}),
        ("complexTool", {"config": {"database": {"connection": {"pool": {"size": 10}}}}}),
    ),
    p(
        "llama3-brackets-in-strings",
        "llama3_json",
        f"{VLLM_LLAMA3} test_extract_tool_calls_with_quotes_and_brackets_in_string",
        LLAMA3_TOOLS,
        '{"name": "searchTool", "parameters": {"query": "test {value} [complex]",'
        '"nested": {"inner": "more {brackets}"}}}',
        ("searchTool", {"query": "test {value} [complex]", "nested": {"inner": "more {brackets}"}}),
    ),
    p(
        "llama3-escaped-quotes",
        "llama3_json",
        f"{VLLM_LLAMA3} test_extract_tool_calls_with_escaped_quotes_in_nested_json",
        LLAMA3_TOOLS,
        '{"name": "parserTool", "parameters": {"text": "He said \\"Hello {world}\\""}}',
        ("parserTool", {"text": 'He said "Hello {world}"'}),
    ),
    p(
        "llama3-missing-name",
        "llama3_json",
        f"{VLLM_LLAMA3} test_extract_tool_calls_missing_name_key",
        LLAMA3_TOOLS,
        '{"parameters": {}}',
    ),
    p(
        "llama3-name-only",
        "llama3_json",
        f"{VLLM_LLAMA3} test_extract_tool_calls_missing_parameters_and_arguments_key",
        LLAMA3_TOOLS,
        '{"name": "toolWithoutParams"}',
    ),
    p(
        "llama3-brace-in-trailing-text",
        "llama3_json",
        f"{VLLM_LLAMA3} test_extract_tool_calls_brace_in_trailing_text",
        LLAMA3_TOOLS,
        '{"name": "searchTool", "parameters": {"query": "test"}} I used {searchTool} for this.',
        SEARCH_TEST,
    ),
    p(
        "llama3-fragment-in-trailing-text",
        "llama3_json",
        f"{VLLM_LLAMA3} test_extract_tool_calls_json_fragment_in_trailing_text",
        LLAMA3_TOOLS,
        '{"name": "searchTool", "parameters": {"query": "test"}} The arguments I passed were '
        '{"query": "test"}',
        SEARCH_TEST,
    ),
    *(
        p(
            f"llama3-separator-{k}",
            "llama3_json",
            f"{VLLM_LLAMA3} test_extract_tool_calls_streaming_parallel_separators[{sep!r}]",
            LLAMA3_TOOLS,
            '{"name": "searchTool", "parameters": {"query": "test1"}}'
            + sep
            + '{"name": "getOpenIncidentsTool", "parameters": {}}',
            ("searchTool", {"query": "test1"}),
            ("getOpenIncidentsTool", {}),
        )
        for k, sep in enumerate(["; ", ";", ";\n", "\n"])
    ),
]

# -- Pythonic (vLLM) ---------------------------------------------------------------------------

VLLM_PYTHONIC = "vllm-project/vllm tests/tool_parsers/test_pythonic_tool_parser.py"
PYTHONIC_TOOLS = (
    spec("get_weather", city=STR, metric=STR),
    spec("register_user", name=STR, age=INT, address=OBJ, role={}, passed_test=BOOL, aliases=ARR),
    spec("do_something_cool", additional_data=OBJ, steps=ARR),
    spec("bad", x=STR),
    spec("calc", x=NUM),
    spec("f", a=STR, b=STR),
    spec("g", b=STR),
    spec("foo", x=INT),
)
SIMPLE = "get_weather(city='San Francisco', metric='celsius')"
SIMPLE_CALL: Call = ("get_weather", {"city": "San Francisco", "metric": "celsius"})
MORE_TYPES = (
    "register_user(name='John Doe', age=37, address={'city': 'San Francisco', 'state': 'CA'}, "
    "role=None, passed_test=True, aliases=['John', 'Johnny'])"
)
MORE_TYPES_CALL: Call = (
    "register_user",
    {
        "name": "John Doe",
        "age": 37,
        "address": {"city": "San Francisco", "state": "CA"},
        "role": None,
        "passed_test": True,
        "aliases": ["John", "Johnny"],
    },
)


def py(id: str, test: str, text: str, *calls: Call) -> PeerCase:
    return p(id, "pythonic", f"{VLLM_PYTHONIC} {test}", PYTHONIC_TOOLS, text, *calls)


PYTHONIC = [
    py("pythonic-no-call", "test_no_tool_call", "How can I help you today?"),
    py("pythonic-simple", "TEST_CASES[simple_nonstreaming]", f"[{SIMPLE}]", SIMPLE_CALL),
    py(
        "pythonic-more-types",
        "TEST_CASES[more_types_nonstreaming]",
        f"[{MORE_TYPES}]",
        MORE_TYPES_CALL,
    ),
    py(
        "pythonic-parameterless",
        "TEST_CASES[parameterless_nonstreaming]",
        "[get_weather()]",
        ("get_weather", {}),
    ),
    py(
        "pythonic-empty-dict",
        "TEST_CASES[empty_dict_nonstreaming]",
        "[do_something_cool(additional_data={})]",
        ("do_something_cool", {"additional_data": {}}),
    ),
    py(
        "pythonic-empty-list",
        "TEST_CASES[empty_list_nonstreaming]",
        "[do_something_cool(steps=[])]",
        ("do_something_cool", {"steps": []}),
    ),
    py(
        "pythonic-escaped",
        "TEST_CASES[escaped_string_nonstreaming]",
        "[get_weather(city='Martha\\'s Vineyard', metric='\\\"cool units\\\"')]",
        ("get_weather", {"city": "Martha's Vineyard", "metric": '"cool units"'}),
    ),
    py(
        "pythonic-parallel",
        "TEST_CASES[parallel_calls_nonstreaming]",
        f"[{SIMPLE}, {MORE_TYPES}]",
        SIMPLE_CALL,
        MORE_TYPES_CALL,
    ),
    py(
        "pythonic-large-steps",
        "test_streaming_tool_call_with_large_steps (deltas joined)",
        f"[{SIMPLE}, get_weather(), do_something_cool(steps=[])]",
        SIMPLE_CALL,
        ("get_weather", {}),
        ("do_something_cool", {"steps": []}),
    ),
    py(
        "pythonic-bad-sibling-bytes",
        "test_bad_sibling_call_does_not_drop_good_calls",
        f"[bad(x=b'z'), {SIMPLE}]",
        SIMPLE_CALL,
    ),
    py(
        "pythonic-non-finite",
        "test_non_finite_argument_rejected",
        f"[calc(x=1e999), {SIMPLE}]",
        SIMPLE_CALL,
    ),
    py(
        "pythonic-unparsable-sibling",
        "test_good_call_survives_unparsable_sibling",
        f"[{SIMPLE}, f(a='x 'y', b='z')]",
        SIMPLE_CALL,
    ),
    py(
        "pythonic-unrecoverable",
        "test_unrecoverable_block_still_reports_no_tool_call",
        "[f(a='x 'y' 'z), g(b='p 'q' 'r)]",
    ),
    py("pythonic-mismatched", "test_streaming_mismatched_brackets_reported_once", "[foo(x=1])]"),
]

# -- Hermes (vLLM) -----------------------------------------------------------------------------

VLLM_HERMES = "vllm-project/vllm tests/tool_parsers/test_hermes_tool_parser.py"
HERMES_TOOLS = (
    spec("final_answer", trigger=BOOL),
    spec("get_current_temperature", "location", unit=STR),
    spec("get_weather", "city"),
    spec("search", "q"),
    spec("get_db_config", "param"),
    spec("do_thing", "input"),
)
HERMES = [
    p(
        "hermes-plain",
        "hermes",
        f"{VLLM_HERMES} test_hermes_parser_non_streaming_no_tool_call",
        HERMES_TOOLS,
        "This is not a tool call.",
    ),
    p(
        "hermes-between-tags",
        "hermes",
        f"{VLLM_HERMES} test_hermes_parser_non_streaming_tool_call_between_tags",
        HERMES_TOOLS,
        '<tool_call>\n{"name": "final_answer", "arguments": {"trigger": true}}\n</tool_call>',
        ("final_answer", {"trigger": True}),
    ),
    p(
        "hermes-until-eos",
        "hermes",
        f"{VLLM_HERMES} test_hermes_parser_non_streaming_tool_call_until_eos",
        HERMES_TOOLS,
        '<tool_call>\n{"name": "final_answer", "arguments": {"trigger": true}}',
        ("final_answer", {"trigger": True}),
    ),
    p(
        "hermes-line-continuations",
        "hermes",
        f"{VLLM_HERMES} test_hermes_parser_streaming",
        HERMES_TOOLS,
        '<tool_call>{"name": "get_current_temperature","arguments": {"location":'
        '"San Francisco, California, United States", "unit": "celsius"}}</tool_call>',
        (
            "get_current_temperature",
            {"location": "San Francisco, California, United States", "unit": "celsius"},
        ),
    ),
    p(
        "hermes-content-then-call",
        "hermes",
        f"{VLLM_HERMES} test_hermes_streaming_content_then_tool_call_with_stream_interval",
        HERMES_TOOLS,
        'Sure, let me check the weather.<tool_call>{"name": "get_weather", '
        '"arguments": {"city": "NYC"}}</tool_call>',
        ("get_weather", {"city": "NYC"}),
    ),
    p(
        "hermes-two",
        "hermes",
        f"{VLLM_HERMES} test_hermes_streaming_multiple_tool_calls_with_stream_interval",
        HERMES_TOOLS,
        '<tool_call>{"name": "search", "arguments": {"q": "cats"}}</tool_call>'
        '<tool_call>{"name": "search", "arguments": {"q": "dogs"}}</tool_call>',
        ("search", {"q": "cats"}),
        ("search", {"q": "dogs"}),
    ),
    p(
        "hermes-serialized-arguments",
        "hermes",
        f"{VLLM_HERMES} test_hermes_parser_non_streaming_serialized_arguments",
        HERMES_TOOLS,
        '<tool_call>\n{"name": "get_db_config", "arguments": "{\\"param\\": \\"max_connections\\"}"}\n'
        "</tool_call>",
        ("get_db_config", {"param": "max_connections"}),
    ),
    p(
        "hermes-bare-string-arguments",
        "hermes",
        f"{VLLM_HERMES} test_hermes_parser_non_streaming_bare_string_arguments",
        HERMES_TOOLS,
        '<tool_call>\n{"name": "do_thing", "arguments": "hello"}\n</tool_call>',
        ("do_thing", {"input": "hello"}),
    ),
]

# -- Ollama's template-driven JSON parsing -----------------------------------------------------

OLLAMA_PARSE = f"{OLLAMA_TOOLS_TEST} TestParseToolCalls"
OLLAMA_FIND = f"{OLLAMA_TOOLS_TEST} TestFindArguments"
OLLAMA_TOOLS = (
    spec("get_current_weather", "location", "format"),
    spec("process_code", "code"),
    spec("send_data", "payload"),
    spec("analyze", text=STR, data=STR),
    spec("search", "pattern"),
    spec("test", a=STR, b=STR, data=STR, text=STR),
    spec("query", "sql"),
    spec("get_temperature", format=STR, location=STR),
)
T1: Call = ("get_current_weather", {"format": "fahrenheit", "location": "San Francisco, CA"})
T2: Call = ("get_current_weather", {"format": "celsius", "location": "Toronto, Canada"})
J1 = '{"name": "get_current_weather", "arguments": {"format":"fahrenheit","location":"San Francisco, CA"}}'
J2 = '{"name": "get_current_weather", "arguments": {"format":"celsius","location":"Toronto, Canada"}}'


def ollama(id: str, test: str, text: str, *calls: Call) -> PeerCase:
    origin = (
        f"{OLLAMA_FIND if test.startswith('find:') else OLLAMA_PARSE}/{test.removeprefix('find:')}"
    )
    return p(id, "ollama_json", origin, OLLAMA_TOOLS, text, *calls)


OLLAMA_JSON = [
    ollama(
        "ollama-mistral-malformed-sibling",
        "mistral malformed json with tool calls prefix",
        f'[TOOL_CALLS]  [{J1},{{"name": "get_curren}}]',
        T1,
    ),
    ollama(
        "ollama-mistral-no-prefix",
        "mistral multiple tool calls without prefix",
        f"[{J1},{J2}]",
        T1,
        T2,
    ),
    ollama(
        "ollama-mistral-prefix",
        "mistral valid json with tool calls prefix",
        f"[TOOL_CALLS]  [{J1},{J2}]",
        T1,
        T2,
    ),
    ollama(
        "ollama-mistral-text-between-prefix",
        "mistral multiple tool calls with text between and prefix",
        f"[TOOL_CALLS]  [{J1},{J2}]\n\t\t\tmodel outputs more tokens here and then [{J1},{J2}]",
        T1,
        T2,
        T1,
        T2,
    ),
    ollama(
        "ollama-mistral-incomplete",
        "mistral incomplete json with tool calls prefix",
        '[TOOL_CALLS]  [{"name": "get_current_weather", "arguments": {"format":"fahrenheit",'
        '"location":"San Francisco, ',
    ),
    ollama(
        "ollama-mistral-suggestion",
        "mistral invalid tool call with explanatory text no prefix",
        "I'm not aware of that information. However, I can suggest searching for the weather "
        f'using the "get_current_weather" function:\n\n\t\t[{J1},{J2}]',
    ),
    ollama(
        "ollama-command-r-plus",
        "command r plus tool calls with json block format",
        'Action: ```json\n\t\t[\n\t\t    {\n\t\t        "tool_name": "get_current_weather",\n'
        '\t\t        "parameters": {\n\t\t            "format": "fahrenheit",\n'
        '\t\t            "location": "San Francisco, CA"\n\t\t        }\n\t\t    },\n\t\t    {\n'
        '\t\t        "tool_name": "get_current_weather",\n\t\t        "parameters": {\n'
        '\t\t            "format": "celsius",\n\t\t            "location": "Toronto, Canada"\n'
        "\t\t        }\n\t\t    }\n\t\t]\n\t\t```",
        T1,
        T2,
    ),
    ollama(
        "ollama-firefunction",
        "firefunction tool calls with functools prefix",
        f" functools[{J1},{J2}]",
        T1,
        T2,
    ),
    ollama(
        "ollama-groq-xml",
        "llama3 groq single tool call with xml tags",
        f"<tool_call>\n\t\t{J1}\n\t\t</tool_call>",
        T1,
    ),
    ollama(
        "ollama-xlam",
        "xlam tool calls with wrapper object",
        f'{{"tool_calls": [{J1},{J2}]}}',
        T1,
        T2,
    ),
    ollama(
        "ollama-qwen-prefix",
        "qwen2.5-coder single tool call with prefix",
        f"<tool_call>{J1}</tool_call>",
        T1,
    ),
    ollama(
        "ollama-qwen-with-and-without-prefix",
        "qwen2.5-coder multiple tool calls with and without prefix",
        f"{J1} <tool_call>{J1}</tool_call> <tool_call>{J2}</tool_call>",
        T1,
        T1,
        T2,
    ),
    ollama(
        "ollama-qwen-plain",
        "qwen2.5-coder plain text response no tool calls",
        "The weather in San Francisco, CA is 70°F and in Toronto, Canada is 20°C.",
    ),
    ollama(
        "ollama-qwen-trailing-text",
        "qwen2.5-coder tool calls with trailing text",
        f"[{J1}, {J2}] some tokens after call",
        T1,
        T2,
    ),
    ollama(
        "ollama-qwen-prefix-trailing",
        "qwen2.5 tool calls with prefix and trailing text",
        f"<tool_call> [{J1}, {J2}] </tool_call> some tokens after call",
        T1,
        T2,
    ),
    ollama(
        "ollama-qwen-prefix-initial-text",
        "qwen2.5 tool calls with prefix and initial text",
        f"some tokens before call <tool_call> [{J1}, {J2}] </tool_call>",
        T1,
        T2,
    ),
    ollama(
        "ollama-qwen-invalid",
        "qwen2.5 tool calls without prefix and invalid tool call",
        '[{"options": "foo"}]',
    ),
    ollama(
        "ollama-qwen-prefix-invalid",
        "qwen2.5 tool calls with prefix and invalid tool call",
        '<tool_call> [{"options": "foo"}] </tool_call> ',
    ),
    ollama(
        "ollama-qwen3-think",
        "qwen3 tool call with think prefix and tool prefix (sent as a single token)",
        f"<think>Okay, let me think what tool we should use...</think><tool_call>{J1}</tool_call>",
        T1,
    ),
    ollama(
        "ollama-qwen3-think-spaces",
        "qwen3 tool call with think prefix, tool prefix, and whitespace (sent as separate tokens)",
        '<think>Okay, let me think what tool we should use...</think> <tool_call>{ "name": '
        '"get_current_weather", "arguments": {"format":"fahrenheit","location":"San Francisco, CA"}} '
        "</tool_call>",
        T1,
    ),
    ollama(
        "ollama-llama32-parameters",
        "llama3.2 valid tool call without prefix",
        '{"name": "get_current_weather", "parameters": {"format":"fahrenheit","location":"San Francisco, CA"}}',
        T1,
    ),
    ollama(
        "ollama-llama32-incomplete",
        "llama3.2 incomplete tool call without prefix",
        '{"name": "get_current_weather", "parameters": {"format":"fahrenheit","location":"San Francisco, ',
    ),
    ollama(
        "ollama-string-with-braces",
        "find:string with braces",
        '{"name": "process_code", "arguments": {"code": "if (x > 0) { return true; }"}}',
        ("process_code", {"code": "if (x > 0) { return true; }"}),
    ),
    ollama(
        "ollama-nested-json-string",
        "find:string with nested json",
        '{"name": "send_data", "arguments": {"payload": "{\\"nested\\": {\\"key\\": \\"value\\"}}"}}',
        ("send_data", {"payload": '{"nested": {"key": "value"}}'}),
    ),
    ollama(
        "ollama-escaped-quotes-braces",
        "find:string with escaped quotes and braces",
        '{"name": "analyze", "arguments": {"text": "The JSON is: {\\"key\\": \\"val{ue}\\"}"}}',
        ("analyze", {"text": 'The JSON is: {"key": "val{ue}"}'}),
    ),
    ollama(
        "ollama-unmatched-brace-in-string",
        "find:unmatched closing brace in string",
        '{"name": "search", "arguments": {"pattern": "regex: }"}}',
        ("search", {"pattern": "regex: }"}),
    ),
    ollama(
        "ollama-braced-value",
        "find:empty string with braces after",
        '{"name": "test", "arguments": {"a": "", "b": "{value}"}}',
        ("test", {"a": "", "b": "{value}"}),
    ),
    ollama(
        "ollama-single-quotes-in-sql",
        "find:single quotes not treated as string delimiters",
        '{"name": "query", "arguments": {"sql": "SELECT * FROM users WHERE name = \'{admin}\'"}}',
        ("query", {"sql": "SELECT * FROM users WHERE name = '{admin}'"}),
    ),
    ollama(
        "ollama-stringified-arguments",
        "find:stringified arguments",
        '{"name": "get_temperature", "arguments": "{\\"format\\": \\"fahrenheit\\", \\"location\\": '
        '\\"San Francisco, CA\\"}"}',
        ("get_temperature", {"format": "fahrenheit", "location": "San Francisco, CA"}),
    ),
    ollama(
        "ollama-stringified-parameters",
        "find:stringified parameters",
        '{"name": "get_temperature", "parameters": "{\\"format\\": \\"fahrenheit\\", \\"location\\": '
        '\\"San Francisco, CA\\"}"}',
        ("get_temperature", {"format": "fahrenheit", "location": "San Francisco, CA"}),
    ),
    ollama(
        "ollama-unicode-escape",
        "find:string with unicode escape",
        '{"name": "test", "arguments": {"text": "Unicode: \\u007B and \\u007D"}}',
        ("test", {"text": "Unicode: { and }"}),
    ),
    ollama(
        "ollama-null-byte",
        "find:null byte in string",
        '{"name": "test", "arguments": {"data": "before\\u0000{after}"}}',
        ("test", {"data": "before\x00{after}"}),
    ),
]

# -- GLM-4.5 -----------------------------------------------------------------------------------

VLLM_GLM = "vllm-project/vllm tests/tool_parsers/test_glm4_moe_tool_parser.py"
GLM_TOOLS = (spec("get_weather", city=STR), spec("get_current_weather", city=STR))


def _glm_call(name: str, **args: str) -> str:
    pairs = "".join(
        f"<arg_key>{k}</arg_key>\n<arg_value>{v}</arg_value>\n" for k, v in args.items()
    )
    return f"<tool_call>{name}\n{pairs}</tool_call>"


GLM = [
    p(
        "glm-vllm-mixed-content",
        "glm45",
        f"{VLLM_GLM} test_extract_tool_calls_mixed_content",
        GLM_TOOLS,
        "I will help you get the weather info.\n\n"
        + _glm_call("get_weather", city="Beijing", date="2025-08-01")
        + "\n\nmeaningwhile, I will also check the weather in Shanghai.\n\n"
        + _glm_call("get_weather", city="Shanghai", date="2025-08-01"),
        ("get_weather", {"city": "Beijing", "date": "2025-08-01"}),
        ("get_weather", {"city": "Shanghai", "date": "2025-08-01"}),
    ),
    p(
        "glm-vllm-content-before",
        "glm45",
        f"{VLLM_GLM} test_extract_tool_calls[tool_call_with_content_before]",
        GLM_TOOLS,
        "I'll help you check the weather. <tool_call>get_current_weather\n"
        "    <arg_key>city</arg_key>\n    <arg_value>Seattle</arg_value>\n"
        "    <arg_key>state</arg_key>\n    <arg_value>WA</arg_value>\n"
        "    <arg_key>unit</arg_key>\n    <arg_value>celsius</arg_value>\n    </tool_call>",
        ("get_current_weather", {"city": "Seattle", "state": "WA", "unit": "celsius"}),
    ),
    p(
        "glm-vllm-thinking",
        "glm45",
        f"{VLLM_GLM} test_extract_tool_calls_with_thinking_tags",
        GLM_TOOLS,
        "<think>I want to get the weather.</think>\n\nI will help you get the weather.\n"
        + _glm_call("get_weather", city="Beijing", date="2025-08-01"),
        ("get_weather", {"city": "Beijing", "date": "2025-08-01"}),
        reasoning="I want to get the weather.",
    ),
]

# -- ReAct (LlamaIndex) ------------------------------------------------------------------------

LLAMA_INDEX = "run-llama/llama_index llama-index-core/tests/agent/react/test_react_output_parser.py"
REACT_TOOLS = (spec("add", a=INT, b=INT), spec("加法", a=INT, b=INT))
NEED = "Thought: I need to use a tool to help me answer the question.\n"
ONE_ONE = ("add", {"a": 1, "b": 1})

REACT = [
    p(
        "react-llamaindex-basic",
        "react",
        f"{LLAMA_INDEX} test_extract_tool_use",
        REACT_TOOLS,
        NEED + 'Action: add\nAction Input: {"a": 1, "b": 1}\n',
        ONE_ONE,
    ),
    p(
        "react-llamaindex-multiline",
        "react",
        f"{LLAMA_INDEX} test_extract_tool_use_multiline",
        REACT_TOOLS,
        NEED + '\nAction: add\n\n\n\nAction Input: {"a": 1, "b": 1}\n',
        ONE_ONE,
    ),
    p(
        "react-llamaindex-extra-action-output",
        "react",
        f"{LLAMA_INDEX} test_extract_tool_use_extra_action_output",
        REACT_TOOLS,
        NEED + 'Action: add (add two numbers)\nAction Input: {"a": 1, "b": 1}\n',
        ONE_ONE,
    ),
    p(
        "react-llamaindex-multiline-input",
        "react",
        f"{LLAMA_INDEX} test_extract_tool_use_multiline_action_input",
        REACT_TOOLS,
        NEED + 'Action: add\nAction Input: {\n    "a": 1,\n    "b": 1\n}\n',
        ONE_ONE,
    ),
    p(
        "react-llamaindex-chinese-name",
        "react",
        f"{LLAMA_INDEX} test_extract_tool_use_with_Chinese_characters",
        REACT_TOOLS,
        NEED + '\nAction: 加法\n\nAction Input: {"a": 1, "b": 1}\n',
        ("加法", {"a": 1, "b": 1}),
    ),
]

PEER_CORPUS: list[PeerCase] = [
    *HARMONY,
    *GEMMA4,
    *FUNCTION_GEMMA,
    *DSML,
    *STEP3,
    *APERTUS,
    *LLAMA_BUILTIN,
    *FUNCTIONARY,
    *DEEPSEEK_R1,
    *SEED_OSS,
    *COHERE,
    *LLAMA3_JSON,
    *PYTHONIC,
    *HERMES,
    *OLLAMA_JSON,
    *GLM,
    *REACT,
]

# -- where rescue decides otherwise, on purpose ------------------------------------------------


@dataclass(frozen=True)
class Divergence:
    """A peer test whose expectation rescue's policy contradicts, and why."""

    case: PeerCase
    peer_calls: list[Call]
    reason: str


DIVERGENCES: list[Divergence] = [
    Divergence(
        p(
            "hermes-missing-final-brace",
            "hermes",
            f"{VLLM_HERMES} test_hermes_parser_non_streaming_tool_call_invalid_json",
            HERMES_TOOLS,
            '<tool_call>\n{"name": "final_answer", "arguments": {"trigger": true}',
            ("final_answer", {"trigger": True}),
        ),
        [],
        "the arguments are complete and only the final brace is missing where the reply ends: "
        "rescue repairs that (vLLM does not)",
    ),
    Divergence(
        p(
            "apertus-call-inside-thinking",
            "apertus",
            f"{OLLAMA_APERTUS} TestApertus15ParserToolCallInsideThinking",
            APERTUS_TOOLS,
            '<|inner_prefix|>Need weather.<|tools_prefix|>[{"get_weather":{"city":"Bern"}}]'
            "<|tools_suffix|>",
            reasoning='Need weather.<|tools_prefix|>[{"get_weather":{"city":"Bern"}}]<|tools_suffix|>',
        ),
        [("get_weather", {"city": "Bern"})],
        "the reasoning block never closes, so the call is inside it, and calls are never taken "
        "from reasoning (Ollama ends the reasoning at the tools token)",
    ),
    Divergence(
        ollama(
            "ollama-mistral-text-between",
            "mistral tool calls with text between no prefix",
            f"[{J1},{J2}] \n\t\t\tmodel outputs more tokens here and then [{J1},{J2}]",
            T1,
            T2,
            T1,
            T2,
        ),
        [T1, T2],
        "Ollama stops reading at the first text after a call; rescue reads every call in the reply",
    ),
    Divergence(
        ollama(
            "ollama-initial-text",
            "qwen2.5-coder tool calls with initial text",
            f"some tokens before call [{J1}, {J2}]",
            T1,
            T2,
        ),
        [],
        "Ollama only reads JSON that opens the reply (or follows the template's tag); rescue "
        "reads calls after prose",
    ),
]
