"""Which agent session a process belongs to, for MCP servers the agent does not tell.

Several agents start their MCP servers without their session id in the
environment (Codex passes almost no variables; Gemini CLI and OpenCode set
no session variable at all), yet they give it to their hooks. So the hook,
at session start, records ``agent<TAB>session`` under the agent's process
(``DIR/<pid>-<start time>``); the MCP server, a child of the same agent
process, looks its own agent process up there before each call. The agent
process is the nearest ancestor that is not a shell (hooks often run through
``sh -c``); the start time guards against a reused pid. Standard library
only: the hook imports this.
"""

from __future__ import annotations

import os

SHELLS = frozenset({"sh", "bash", "dash", "zsh", "fish", "ksh", "env", "timeout", "nice"})


def _stat(pid: int) -> tuple[str, int, str] | None:
    """(command name, parent pid, start time) of a process, from /proc."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read().decode(errors="replace")
    except OSError:
        return None
    comm = raw[raw.index("(") + 1 : raw.rindex(")")]
    fields = raw[raw.rindex(")") + 2 :].split()
    return comm, int(fields[1]), fields[19]


def agent_process(pid: int | None = None) -> str:
    """``<pid>-<start time>`` of the nearest non-shell ancestor of ``pid`` (default: us)."""
    pid = os.getppid() if pid is None else pid
    for _ in range(8):
        st = _stat(pid)
        if st is None or pid <= 1:
            return ""
        comm, ppid, start = st
        if comm not in SHELLS and not comm.startswith("python"):
            return f"{pid}-{start}"
        pid = ppid
    return ""


def record(directory: str, agent: str, session: str, key: str | None = None) -> None:
    key = agent_process() if key is None else key
    if not key or not session:
        return
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        tmp = os.path.join(directory, f".{key}.{os.getpid()}")
        with open(tmp, "w") as fh:
            fh.write(f"{agent}\t{session}\n")
        os.replace(tmp, os.path.join(directory, key))
    except OSError:
        pass  # best effort: a hook never fails a session over this


def forget(directory: str, key: str | None = None) -> None:
    key = agent_process() if key is None else key
    if key:
        try:  # noqa: SIM105 - contextlib costs the hook an import
            os.unlink(os.path.join(directory, key))
        except OSError:
            pass


def lookup(directory: str, key: str | None = None) -> tuple[str, str]:
    """(agent, session) recorded for our agent process, or ``("", "")``."""
    key = agent_process() if key is None else key
    if not key:
        return "", ""
    try:
        with open(os.path.join(directory, key)) as fh:
            agent, _, session = fh.read().strip().partition("\t")
    except OSError:
        return "", ""
    return agent, session
