"""``tenantry agent -- CMD``: start a program as a sandboxed agent session.

1. register the session through the user's own socket (the daemon opens the
   session's socket);
2. write Tenantry's Slurm shims into the session directory (first on PATH
   inside);
3. start bubblewrap with the profile, learn the PID-namespace init from
   ``--info-fd`` and tell the daemon (so the kill switch can end the tree);
4. wait, then end the session. The exit status is the program's.

Standard library only.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Sequence

import tenantry
from tenantry.safety.sandbox import profile
from tenantry.safety.sandbox.bwrap import find_bwrap

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from tenantry.client.sync import Client


def _split(raw: str) -> list[str]:
    return [os.path.expanduser(x.strip()) for x in raw.split(",") if x.strip()]


def plan(
    reg: dict[str, Any], command: Sequence[str], env: dict[str, str], info_fd: int | None = None
) -> list[str]:
    """The bubblewrap argv for a registered session (``reg`` is ``sandbox.register``'s)."""
    paths = profile.SessionPaths(
        home=reg["home"],
        project=os.getcwd(),
        state_dir=reg["state_dir"],
        session_dir=reg["session_dir"],
        inside_runtime=reg["inside_runtime"],
        scratch=tuple(reg["writable"]),
    )
    inner = profile.session_env(
        env,
        paths,
        session=reg["session"],
        agent=reg["agent"],
        project=reg["project"],
        extra_allow=_split(reg.get("env_allow", "")),
    )
    return profile.bwrap_argv(
        find_bwrap(reg.get("bwrap", "")),
        paths,
        command,
        inner,
        extra_hidden=_split(reg.get("hide", "")),
        info_fd=info_fd,
        keep_visible=profile.own_runtime(),
    )


_CLI = """#!{python} -I
# tenantry (written by `tenantry agent`: the client inside the sandbox)
import sys
sys.path.insert(0, {src!r})
from tenantry.cli.main import main
sys.exit(main())
"""


def _shims(session_dir: str) -> None:
    """Tenantry's Slurm shims and a ``tenantry`` client, first on PATH inside."""
    from tenantry.agents.shims.install import install

    bin_dir = os.path.join(session_dir, "bin")
    install(bin_dir, force=True)
    src = os.path.dirname(os.path.dirname(os.path.abspath(tenantry.__file__)))
    path = os.path.join(bin_dir, "tenantry")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(_CLI.format(python=sys.executable, src=src))
    os.chmod(path, 0o755)  # noqa: S103 - a program, in the session's 0700 directory


def _agent_state(agent: str, home: str) -> None:
    """Create the agent's own state entries so they are bound writable."""
    for entry in profile.AGENT_STATE.get(agent, ()):
        path = home + entry[1:]
        if entry.endswith("/"):
            os.makedirs(path, mode=0o700, exist_ok=True)
        elif not os.path.exists(path):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
            with os.fdopen(fd, "w") as fh:
                fh.write("{}\n" if path.endswith(".json") else "")


def launch(
    client: Client,
    command: Sequence[str],
    *,
    agent: str,
    project: str,
    tier: str = "",
    quiet: bool = False,
) -> int:
    reg = client.call(
        "sandbox.register",
        {
            "agent": agent,
            "project": project,
            "tier": tier,
            "cwd": os.getcwd(),
            "argv": list(command),
        },
    )
    sid = reg["session"]
    r, w = os.pipe()
    try:
        _agent_state(reg["agent"], reg["home"])
        argv = plan(reg, command, dict(os.environ), info_fd=w)
        _shims(reg["session_dir"])
    except BaseException:
        os.close(r)
        os.close(w)
        client.call("sandbox.end", {"session": sid})
        raise
    if not quiet:
        inside = os.path.join(reg["inside_runtime"], "tenantry", "sock")
        sys.stderr.write(
            f"tenantry: agent session {sid} ({reg['agent']}) in a sandbox;"
            f" its socket is {reg['socket']} (inside: {inside})\n"
        )
    try:
        proc = subprocess.Popen(argv, pass_fds=(w,), close_fds=True)
    finally:
        os.close(w)
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)  # the agent handles its own Ctrl-C
    try:
        with os.fdopen(r, "rb") as info:
            raw = info.read(4096)
        try:
            pid = int(json.loads(raw.decode() or "{}").get("child-pid", 0))
        except (ValueError, AttributeError):
            pid = 0
        if pid:
            client.call("sandbox.attach", {"session": sid, "pid": pid})
        code = proc.wait()
    finally:
        signal.signal(signal.SIGINT, old)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        try:
            client.call("sandbox.end", {"session": sid})
        except Exception as exc:
            sys.stderr.write(f"tenantry: could not end session {sid}: {exc}\n")
    return code if code >= 0 else 128 - code
