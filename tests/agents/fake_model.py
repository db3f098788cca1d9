"""A scripted fake model server on 127.0.0.1 for driving real agent CLIs.

It speaks just enough of each vendor's API for an agent's session loop:
Anthropic Messages (streaming SSE and plain JSON), OpenAI Responses and Chat
Completions (streaming), and Gemini ``generateContent`` /
``streamGenerateContent``. The script is a list of ``Step``s; the step for a
request is the number of tool results the conversation already holds, so the
server keeps no per-session state. Requests that offer no tools (titles,
summaries, quota probes) get a short text answer. Every request body is kept
in ``requests`` and every tool result the agent sent back in ``tool_results``
so a test can read what the agent saw (a hook's redirect message, say).
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Step:
    """Call ``tool`` (matched by name suffix) with ``args``, or say ``text``."""

    tool: str = ""
    args: dict[str, Any] = field(default_factory=dict)
    text: str = ""


def session_script(tool: str, allowed: dict[str, Any], refused: dict[str, Any]) -> list[Step]:
    """The session every agent test plays: ask the facility, run ``tool`` once with
    ``allowed`` (a command the policy lets through) and once with ``refused`` (one
    it denies), then finish."""
    return [
        Step("facility_info", {}),
        Step(tool, allowed),
        Step(tool, refused),
        Step(text="all done"),
    ]


@dataclass
class Script:
    steps: list[Step]
    requests: list[dict[str, Any]] = field(default_factory=list)
    tool_results: list[str] = field(default_factory=list)
    offered: set[str] = field(default_factory=set)
    # the main conversation is the request offering this tool (titles, probes offer none)
    trigger: str = "facility_info"
    waits: int = 0  # WaitForMcpServers calls made (at most MAX_WAITS: a server that
    # never connects ends the session instead)
    lock: threading.Lock = field(default_factory=threading.Lock)


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_text_of(c.get("text", c.get("content", ""))) for c in content if c)
    if isinstance(content, dict):
        return _text_of(content.get("text") or content.get("content") or json.dumps(content))
    return str(content)


NS = "\x1f"  # joins a namespace and a tool name in the offered list


def _pick(offered: list[str], suffix: str) -> str:
    for name in offered:
        if (
            name == suffix
            or name.endswith(("__" + suffix, NS + suffix))
            or name.endswith("_" + suffix)
        ):
            return name
    return suffix


# --- reading a request: (offered tool names, tool results so far) ---------------


WAIT_TOOL = "WaitForMcpServers"  # Claude Code's: wait for MCP servers still connecting
MAX_WAITS = 3


def _one_more_wait(script: Script) -> bool:
    """Count one more wait for a connecting MCP server, unless MAX_WAITS were made."""
    with script.lock:
        if script.waits >= MAX_WAITS:
            return False
        script.waits += 1
        return True


def _anthropic(body: dict[str, Any]) -> tuple[list[str], list[str]]:
    tools = [str(t.get("name", "")) for t in body.get("tools") or []]
    results = []
    waits: set[str] = set()  # tool_use ids of the model's waits: not the script's steps
    for m in body.get("messages") or []:
        if isinstance(m.get("content"), list):
            for c in m["content"]:
                if c.get("type") == "tool_use" and c.get("name") == WAIT_TOOL:
                    waits.add(str(c.get("id")))
                elif c.get("type") == "tool_result" and str(c.get("tool_use_id")) not in waits:
                    results.append(_text_of(c.get("content")))
    return tools, results


def _openai_responses(body: dict[str, Any]) -> tuple[list[str], list[str]]:
    tools = []
    for t in body.get("tools") or []:
        if t.get("type") == "namespace":  # Codex groups an MCP server's tools
            tools += [f"{t['name']}{NS}{sub.get('name')}" for sub in t.get("tools") or []]
        else:
            tools.append(str(t.get("name") or (t.get("function") or {}).get("name") or ""))
    results = []
    items = body.get("input")
    for it in items if isinstance(items, list) else []:
        if it.get("type") in ("function_call_output", "custom_tool_call_output"):
            results.append(_text_of(it.get("output")))
    return tools, results


def _openai_chat(body: dict[str, Any]) -> tuple[list[str], list[str]]:
    tools = [str((t.get("function") or {}).get("name", "")) for t in body.get("tools") or []]
    results = [
        _text_of(m.get("content")) for m in body.get("messages") or [] if m.get("role") == "tool"
    ]
    return tools, results


def _gemini(body: dict[str, Any]) -> tuple[list[str], list[str]]:
    tools = [
        str(d.get("name", ""))
        for t in body.get("tools") or []
        for d in t.get("functionDeclarations") or t.get("function_declarations") or []
    ]
    results = []
    for c in body.get("contents") or []:
        for p in c.get("parts") or []:
            fr = p.get("functionResponse") or p.get("function_response")
            if fr:
                results.append(json.dumps(fr.get("response")))
    return tools, results


# --- answering -------------------------------------------------------------------


def _sse(events: list[tuple[str | None, dict[str, Any]]]) -> bytes:
    out = []
    for name, data in events:
        if name:
            out.append(f"event: {name}\n")
        out.append(f"data: {json.dumps(data)}\n\n")
    return "".join(out).encode()


def _anthropic_answer(step: Step, tool: str, model: str, stream: bool) -> tuple[str, bytes]:
    block: dict[str, Any]
    if step.tool:
        block = {
            "type": "tool_use",
            "id": f"toolu_{abs(hash((tool, json.dumps(step.args)))) % 10**12}",
            "name": tool,
            "input": {},
        }
        stop = "tool_use"
    else:
        block = {"type": "text", "text": ""}
        stop = "end_turn"
    usage = {"input_tokens": 10, "output_tokens": 5}
    msg: dict[str, Any] = {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": usage,
    }
    if not stream:
        full = dict(block)
        if step.tool:
            full["input"] = step.args
        else:
            full["text"] = step.text
        return "application/json", json.dumps(
            {**msg, "content": [full], "stop_reason": stop}
        ).encode()
    delta = (
        {"type": "input_json_delta", "partial_json": json.dumps(step.args)}
        if step.tool
        else {"type": "text_delta", "text": step.text}
    )
    return "text/event-stream", _sse(
        [
            ("message_start", {"type": "message_start", "message": msg}),
            (
                "content_block_start",
                {"type": "content_block_start", "index": 0, "content_block": block},
            ),
            ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": 5},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
    )


def _responses_answer(step: Step, tool: str, n: int) -> tuple[str, bytes]:
    if step.tool:
        namespace, _, short = tool.rpartition(NS)
        item: dict[str, Any] = {
            "type": "function_call",
            "id": f"fc_{n}",
            "call_id": f"call_{n}",
            "name": short,
            "arguments": json.dumps(step.args),
            "status": "completed",
        }
        if namespace:
            item["namespace"] = namespace
    else:
        item = {
            "type": "message",
            "id": f"msg_{n}",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": step.text, "annotations": []}],
        }
    resp = {
        "id": f"resp_{n}",
        "object": "response",
        "status": "completed",
        "output": [item],
        "usage": {
            "input_tokens": 10,
            "output_tokens": 5,
            "total_tokens": 15,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    }
    return "text/event-stream", _sse(
        [
            (
                "response.created",
                {
                    "type": "response.created",
                    "response": {**resp, "status": "in_progress", "output": []},
                },
            ),
            (
                "response.output_item.added",
                {"type": "response.output_item.added", "output_index": 0, "item": item},
            ),
            (
                "response.output_item.done",
                {"type": "response.output_item.done", "output_index": 0, "item": item},
            ),
            ("response.completed", {"type": "response.completed", "response": resp}),
        ]
    )


def _chat_answer(step: Step, tool: str, n: int, model: str) -> tuple[str, bytes]:
    if step.tool:
        delta: dict[str, Any] = {
            "role": "assistant",
            "tool_calls": [
                {
                    "index": 0,
                    "id": f"call_{n}",
                    "type": "function",
                    "function": {"name": tool, "arguments": json.dumps(step.args)},
                }
            ],
        }
        finish = "tool_calls"
    else:
        delta = {"role": "assistant", "content": step.text}
        finish = "stop"
    base = {"id": f"chatcmpl-{n}", "object": "chat.completion.chunk", "created": 0, "model": model}
    return "text/event-stream", (
        _sse(
            [
                (None, {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}),
                (
                    None,
                    {
                        **base,
                        "choices": [{"index": 0, "delta": {}, "finish_reason": finish}],
                        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
                    },
                ),
            ]
        )
        + b"data: [DONE]\n\n"
    )


def _gemini_answer(step: Step, tool: str, stream: bool) -> tuple[str, bytes]:
    part: dict[str, Any] = (
        {"functionCall": {"name": tool, "args": step.args}} if step.tool else {"text": step.text}
    )
    resp = {
        "candidates": [
            {"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
    }
    if stream:
        return "text/event-stream", _sse([(None, resp)])
    return "application/json", json.dumps(resp).encode()


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def _reply(self, status: int, ctype: str, data: bytes) -> None:
        self.send_response(status)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            self._reply(
                200,
                "application/json",
                json.dumps({"object": "list", "data": [], "models": []}).encode(),
            )
            return
        self._reply(404, "application/json", b'{"error": "not found"}')

    def do_HEAD(self) -> None:
        self._reply(200, "text/plain", b"")

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b"{}"
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        path = self.path.split("?")[0]
        script = self.server.script
        with script.lock:
            script.requests.append({"path": self.path, "body": body})
        if path.endswith("/count_tokens"):
            self._reply(200, "application/json", b'{"input_tokens": 10}')
            return
        if "/messages" in path:
            kind, reader = "anthropic", _anthropic
        elif path.endswith("/responses"):
            kind, reader = "responses", _openai_responses
        elif path.endswith("/chat/completions"):
            kind, reader = "chat", _openai_chat
        elif ":generateContent" in path or ":streamGenerateContent" in path:
            kind, reader = "gemini", _gemini
        elif ":countTokens" in path:
            self._reply(200, "application/json", b'{"totalTokens": 10}')
            return
        else:
            self._reply(404, "application/json", b'{"error": "not found"}')
            return
        offered, results = reader(body)
        if offered and any(name.endswith(script.trigger) for name in offered):
            with script.lock:
                script.offered.update(offered)
                if len(results) > len(script.tool_results):
                    script.tool_results[:] = results
            index = len(results)
            step = script.steps[index] if index < len(script.steps) else Step(text="done")
        elif WAIT_TOOL in offered and _one_more_wait(script):
            # the script's tools come from an MCP server still connecting: wait for it,
            # as the tool's description tells a model to
            step = Step(WAIT_TOOL, {})
        else:
            step = Step(text="ok")
        tool = _pick(offered, step.tool) if step.tool else ""
        model = str(body.get("model") or "fake-model")
        if kind == "anthropic":
            ctype, data = _anthropic_answer(step, tool, model, bool(body.get("stream")))
        elif kind == "responses":
            ctype, data = _responses_answer(step, tool, len(script.requests))
        elif kind == "chat":
            ctype, data = _chat_answer(step, tool, len(script.requests), model)
        else:
            ctype, data = _gemini_answer(step, tool, "streamGenerateContent" in path)
        self._reply(200, ctype, data)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    script: Script


class FakeModel:
    """``with FakeModel(steps) as fm: fm.url``: serves until the block ends."""

    def __init__(self, steps: list[Step], trigger: str = "facility_info") -> None:
        self.script = Script(steps, trigger=trigger)
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.script = self.script
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def __enter__(self) -> FakeModel:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)
