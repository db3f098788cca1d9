"""Read coding agents' own session records and humans' shell histories as actions.

- Claude Code: ``~/.claude/projects/<project>/<session>.jsonl``, one JSON
  object per line; ``assistant`` lines carry ``message.content`` items of type
  ``tool_use`` (``name``, ``id``, ``input.command`` for ``Bash``), with an ISO
  ``timestamp`` and ``sessionId``.
- Codex: ``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``; lines
  ``{"timestamp", "type", "payload"}`` where ``session_meta`` names the session
  and ``response_item`` payloads of type ``function_call`` /
  ``local_shell_call`` / ``custom_tool_call`` are commands (older rollouts put
  the item at the top level, without a timestamp: it inherits the last one).
- Gemini CLI: ``~/.gemini/tmp/<project>/chats/session-*.json``, one JSON
  document with ``sessionId`` and ``messages``; ``toolCalls`` of ``gemini``
  messages are commands.
- bash history written with ``HISTTIMEFORMAT`` (``#<epoch>`` before each
  command) and zsh extended history (``: <epoch>:<duration>;<command>``).

Copies of one session (a resumed Claude session repeats the earlier lines, a
backup of the directory repeats whole files) are counted once: each action has
a key (the tool call's id, else session + time + command) and duplicates are
dropped across all inputs. Timestamps without a zone are read in the
facility's zone and counted in the input's notes. The user is the home
directory's owner named in the path (``/home/<user>/...``), else the file's
owner. Transcripts are small next to accounting logs: they are read in Python.
"""

from __future__ import annotations

import json
import pwd
import re
from pathlib import Path
from typing import Any

from tenantry.report.actions import Clock, frame, tool_category
from tenantry.report.files import read_text
from tenantry.report.schema import IngestStats, Unreadable

KINDS = ("claude", "codex", "gemini", "history")
_HOME = re.compile(r"/(?:home|Users)/([^/]+)/")
_ZSH = re.compile(r"^: (\d+):\d+;(.*)$")


def user_of(path: Path) -> str:
    m = _HOME.search(str(path.resolve()))
    if m:
        return m.group(1)
    try:
        return pwd.getpwuid(path.stat().st_uid).pw_name
    except KeyError:
        return str(path.stat().st_uid)


def sniff(head: str) -> str | None:
    """The transcript kind of a file from its first lines, or None."""
    first = head.lstrip().split("\n", 1)[0].strip()
    if first.startswith("#") and first[1:].strip().isdigit():
        return "history"
    if _ZSH.match(first):
        return "history"
    if not first.startswith("{"):
        return None
    try:
        obj = json.loads(first)
    except ValueError:
        obj = None
    if isinstance(obj, dict):
        if obj.get("type") in ("session_meta", "response_item", "turn_context", "event_msg"):
            return "codex"
        if "sessionId" in obj and ("uuid" in obj or obj.get("type") in ("user", "assistant")):
            return "claude"
        if obj.get("type") == "summary" and "leafUuid" in obj:
            return "claude"
    stripped = head.lstrip()
    if stripped.startswith("{") and '"messages"' in head and '"sessionId"' in head:
        return "gemini"
    return None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _shell_text(value: Any) -> str:
    if isinstance(value, list):
        parts = [str(x) for x in value]
        if len(parts) >= 3 and parts[0] in ("bash", "sh", "zsh") and parts[1] in ("-lc", "-c"):
            return parts[2]
        return " ".join(parts)
    return str(value or "")


def _tool_call(call: dict[str, Any], args_key: str) -> tuple[str, str]:
    """A tool call's name, and the shell command among its arguments ("" if none)."""
    return str(call.get("name") or ""), str(_dict(call.get(args_key)).get("command") or "")


def _key(ns: str, call_id: str, session: str, ts: Any, tool: str, cmd: str) -> str:
    """A row's key: ``ns:call_id`` where the agent named the call, else by what it ran."""
    return f"{ns}:{call_id}" if call_id else f"{ns}:{session}:{ts}:{tool}:{cmd}"


def _row(
    source: str, user: str, actor: str, session: str, ts: Any, tool: str, cmd: str, key: str
) -> dict[str, object]:
    return {
        "source": source,
        "user": user,
        "actor": actor,
        "session": session,
        "ts": ts,
        "tool": tool,
        "category": tool_category(tool, cmd),
        "key": key,
    }


def _jsonl(text: str, stats: IngestStats, source: str) -> list[tuple[int, dict[str, Any]]]:
    out = []
    for no, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError as exc:
            stats.unreadable.append(Unreadable(source, no, f"not JSON: {exc}", line[:200]))
            continue
        if isinstance(obj, dict):
            out.append((no, obj))
        else:
            stats.unreadable.append(Unreadable(source, no, "not a JSON object", line[:200]))
    return out


def read_claude(p: Path, clock: Clock, stats: IngestStats) -> list[dict[str, object]]:
    user, rows = user_of(p), []
    for no, obj in _jsonl(read_text(p), stats, str(p)):
        msg = obj.get("message")
        if obj.get("type") != "assistant" or not isinstance(msg, dict):
            continue
        content = msg.get("content")
        if not isinstance(content, list):
            continue
        session = str(obj.get("sessionId") or p.stem)
        ts = clock.parse(obj.get("timestamp"))
        if ts is None:
            stats.unreadable.append(Unreadable(str(p), no, "no valid timestamp", str(obj)[:200]))
            continue
        for item in content:
            if not isinstance(item, dict) or item.get("type") != "tool_use":
                continue
            tool, cmd = _tool_call(item, "input")
            key = _key("claude", str(item.get("id") or ""), session, ts, tool, cmd)
            rows.append(_row(p.name, user, "claude-code", session, ts, tool, cmd, key))
    return rows


def read_codex(p: Path, clock: Clock, stats: IngestStats) -> list[dict[str, object]]:
    user, rows = user_of(p), []
    session, last_ts = p.stem, None
    for no, obj in _jsonl(read_text(p), stats, str(p)):
        ts = clock.parse(obj["timestamp"]) if "timestamp" in obj else last_ts
        last_ts = ts or last_ts
        payload = _dict(obj.get("payload")) or obj
        if obj.get("type") == "session_meta" or ("id" in obj and "instructions" in obj):
            session = str(payload.get("id") or session)
            continue
        kind = payload.get("type")
        if kind not in ("function_call", "local_shell_call", "custom_tool_call"):
            continue
        if ts is None:
            stats.unreadable.append(Unreadable(str(p), no, "no timestamp yet", str(obj)[:200]))
            continue
        tool = str(payload.get("name") or ("local_shell" if kind == "local_shell_call" else ""))
        cmd = ""
        raw = payload.get("arguments")
        if isinstance(raw, str):
            try:
                parsed = json.loads(raw)
            except ValueError:
                parsed = {}
            if isinstance(parsed, dict):
                cmd = _shell_text(parsed.get("command") or parsed.get("cmd"))
        action = payload.get("action")
        if isinstance(action, dict):
            cmd = _shell_text(action.get("command"))
        call = payload.get("call_id") or payload.get("id")
        key = _key("codex", f"{session}:{call}" if call else "", session, ts, tool, cmd)
        rows.append(_row(p.name, user, "codex", session, ts, tool, cmd, key))
    return rows


def read_gemini(p: Path, clock: Clock, stats: IngestStats) -> list[dict[str, object]]:
    user, rows = user_of(p), list[dict[str, object]]()
    try:
        doc = json.loads(read_text(p))
    except ValueError as exc:
        stats.unreadable.append(Unreadable(str(p), 1, f"not JSON: {exc}", ""))
        return rows
    if not isinstance(doc, dict) or not isinstance(doc.get("messages"), list):
        stats.unreadable.append(Unreadable(str(p), 1, "no 'messages' list", str(doc)[:200]))
        return rows
    session = str(doc.get("sessionId") or p.stem)
    for i, msg in enumerate(doc["messages"], start=1):
        if not isinstance(msg, dict):
            continue
        for call in msg.get("toolCalls") or []:
            if not isinstance(call, dict):
                continue
            ts = clock.parse(call.get("timestamp") or msg.get("timestamp"))
            if ts is None:
                stats.unreadable.append(
                    Unreadable(str(p), i, "no valid timestamp", str(call)[:200])
                )
                continue
            tool, cmd = _tool_call(call, "args")
            call_id = f"{session}:{call['id']}" if call.get("id") else ""
            key = _key("gemini", call_id, session, ts, tool, cmd)
            rows.append(_row(p.name, user, "gemini-cli", session, ts, tool, cmd, key))
    return rows


def read_history(p: Path, clock: Clock, stats: IngestStats) -> list[dict[str, object]]:
    """bash (``#<epoch>`` lines) or zsh extended history: a human's commands."""
    user, rows = user_of(p), []
    pending: int | None = None
    untimed = 0
    for line in read_text(p).split("\n"):
        if not line.strip():
            continue
        m = _ZSH.match(line)
        if m:
            ts, cmd = int(m.group(1)), m.group(2)
        elif line.startswith("#") and line[1:].strip().isdigit():
            pending = int(line[1:].strip())
            continue
        elif pending is not None:
            ts, cmd, pending = pending, line, None
        else:
            untimed += 1
            continue
        when = clock.parse(ts)
        key = f"history:{user}:{ts}:{cmd}"
        rows.append(_row(p.name, user, "human", f"shell:{user}", when, "shell", cmd, key))
    if untimed:
        stats.notes.append(f"{untimed} history line(s) without a timestamp were skipped")
    return rows


READERS = {
    "claude": read_claude,
    "codex": read_codex,
    "gemini": read_gemini,
    "history": read_history,
}


def read(path: Path, kind: str, tz: str = "UTC") -> tuple[Any, IngestStats]:
    """(actions frame, stats) of one transcript or history file."""
    stats = IngestStats(source=str(path), kind=kind)
    clock = Clock(tz)
    rows = READERS[kind](path, clock, stats)
    if clock.zoneless:
        stats.notes.append(f"{clock.zoneless} timestamp(s) had no zone; read as {tz}")
    stats.records = len(rows)
    return frame(rows), stats
