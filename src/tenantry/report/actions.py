"""What one command is: explore, modify or execute (the agent loop's three steps).

An *action* is one command issued by an actor: a tool call of a coding agent
(from its transcript) or a line of a human's shell history. Pure functions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import polars as pl

from tenantry.report.schema import UTC_TS

ACTION_SCHEMA: dict[str, pl.DataType] = {
    "source": pl.String(),
    "user": pl.String(),
    "actor": pl.String(),  # "human" or the agent product
    "session": pl.String(),
    "ts": UTC_TS,
    "tool": pl.String(),
    "category": pl.String(),  # explore | modify | execute
    "key": pl.String(),  # identity for de-duplication across copies
}

# Agent tools by name (Claude Code, Codex, Gemini CLI), lower-case.
TOOL_CATEGORY = {
    "read": "explore",
    "grep": "explore",
    "glob": "explore",
    "ls": "explore",
    "webfetch": "explore",
    "websearch": "explore",
    "read_file": "explore",
    "read_many_files": "explore",
    "list_directory": "explore",
    "search_file_content": "explore",
    "google_web_search": "explore",
    "web_fetch": "explore",
    "view_image": "explore",
    "edit": "modify",
    "multiedit": "modify",
    "write": "modify",
    "notebookedit": "modify",
    "apply_patch": "modify",
    "write_file": "modify",
    "replace": "modify",
}
SHELL_TOOLS = {
    "bash",
    "shell",
    "local_shell",
    "run_shell_command",
    "exec_command",
    "container.exec",
}
EXPLORE_CMDS = {
    "ls", "cat", "less", "more", "head", "tail", "grep", "rg", "ag", "find", "fd", "tree",
    "wc", "file", "stat", "pwd", "which", "du", "df", "diff", "man", "squeue", "sinfo",
    "sacct", "scontrol", "jq", "echo", "history", "cd", "env", "printenv",
}  # fmt: skip
MODIFY_CMDS = {
    "vi", "vim", "nvim", "nano", "emacs", "mv", "cp", "rm", "mkdir", "touch", "chmod",
    "ln", "patch", "tee", "apply_patch", "rmdir",
}  # fmt: skip
EXPLORE_GIT = {"status", "log", "diff", "show", "branch", "blame", "grep"}
MODIFY_GIT = {"add", "commit", "checkout", "restore", "mv", "rm", "stash", "apply", "am"}
_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_WRAPPERS = {"sudo", "env", "time", "nohup", "command", "exec", "bash", "sh", "-lc", "-c"}


def shell_category(command: str) -> str:
    """explore / modify / execute for one shell command line (first command counts)."""
    words = re.split(r"\s+", command.strip().split("|")[0].split("&&")[0].strip())
    while words and (words[0] in _WRAPPERS or _ASSIGN.match(words[0]) or not words[0]):
        words = words[1:]
    if not words:
        return "execute"
    head = words[0].rsplit("/", 1)[-1]
    if head == "git" and len(words) > 1:
        if words[1] in EXPLORE_GIT:
            return "explore"
        if words[1] in MODIFY_GIT:
            return "modify"
        return "execute"
    if head == "sed" and any(w.startswith("-i") for w in words[1:]):
        return "modify"
    if head in ("sed", "awk"):
        return "explore"
    if head in EXPLORE_CMDS:
        return "explore"
    if head in MODIFY_CMDS:
        return "modify"
    return "execute"


def tool_category(tool: str, command: str | None) -> str:
    name = tool.lower()
    if name in SHELL_TOOLS:
        return shell_category(command or "")
    return TOOL_CATEGORY.get(name, "execute")


@dataclass(slots=True)
class Clock:
    """Parses transcript timestamps; a zone-less one is read in ``tz`` and counted."""

    tz: str = "UTC"
    zoneless: int = 0
    bad: int = 0

    def parse(self, value: object) -> datetime | None:
        if isinstance(value, int | float) and not isinstance(value, bool):
            secs = value / 1000 if value > 10**11 else value  # epoch ms or s
            return datetime.fromtimestamp(secs, tz=UTC)
        if not isinstance(value, str) or not value:
            self.bad += 1
            return None
        text = value.strip().replace("Z", "+00:00")
        try:
            t = datetime.fromisoformat(text)
        except ValueError:
            self.bad += 1
            return None
        if t.tzinfo is None:
            self.zoneless += 1
            t = t.replace(tzinfo=ZoneInfo(self.tz))
        return t.astimezone(UTC)


def frame(rows: list[dict[str, object]]) -> pl.DataFrame:
    if not rows:
        return pl.DataFrame(schema=ACTION_SCHEMA)
    return pl.DataFrame(rows, schema=ACTION_SCHEMA)
