"""A tiny stdio MCP server of the tests, written by hand so that it can misbehave.

python lines_server.py MODE PID_FILE

It writes its pid to PID_FILE once it has read its first line, then, by MODE:

- `mute`: answers nothing (a server stuck before `initialize`);
- `no-list`: answers `initialize`, never `tools/list`;
- `no-call`: answers `initialize` and `tools/list` (one tool, `wait`), never `tools/call`;
- `dotted`: lists `files.read` (a dot: legal in MCP, refused by model APIs), `echo` and
  `echo_` ... and answers every call with its name and arguments;
- `big`: lists `big`, which answers `{"text": "N"}` with a text of N characters that starts
  with `HEAD` and ends with `TAIL`.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}}
TOOLS = {
    "no-call": ["wait"],
    "dotted": ["files.read", "files_read", "echo", "a" * 70, "sp ace"],
    "big": ["big"],
}
READ_ONLY = {"readOnlyHint": True}


def answer(request_id: Any, result: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}) + "\n")
    sys.stdout.flush()


def main(mode: str, pid_file: str) -> None:
    told = False
    for line in sys.stdin:
        if not told:
            Path(pid_file).write_text(str(os.getpid()))
            told = True
        message = json.loads(line)
        method, request_id = message.get("method"), message.get("id")
        if request_id is None or mode == "mute":
            continue  # a notification, or a server that never answers
        if method == "initialize":
            answer(
                request_id,
                {
                    "protocolVersion": message["params"]["protocolVersion"],
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "lines", "version": "0"},
                },
            )
        elif method == "tools/list" and mode != "no-list":
            tools = [
                {"name": n, "inputSchema": SCHEMA, "annotations": READ_ONLY}
                for n in TOOLS.get(mode, [])
            ]
            answer(request_id, {"tools": tools})
        elif method == "tools/call" and mode == "dotted":
            params = message["params"]
            text = f"{params['name']} got {json.dumps(params.get('arguments') or {})}"
            answer(request_id, {"content": [{"type": "text", "text": text}], "isError": False})
        elif method == "tools/call" and mode == "big":
            size = int(message["params"]["arguments"]["text"])
            text = "HEAD" + "x" * (size - 8) + "TAIL"
            answer(request_id, {"content": [{"type": "text", "text": text}], "isError": False})


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
