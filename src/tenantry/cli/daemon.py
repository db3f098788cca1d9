"""``tenantry stop`` and ``tenantry doctor``: the daemon's lifecycle and a health check.

Standard library only (client path). ``stop`` signals the daemon whose pid
its state directory's lock file names, after checking that the pid really
is a ``tenantry serve``; ``doctor`` checks what a first run needs and says
what to fix.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import time
from pathlib import Path

from tenantry.cli.common import command, emit, settings_from
from tenantry.core import errors

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from tenantry.core.settings import Settings


def register(sub: Any) -> None:
    with command(
        sub,
        "stop",
        _stop,
        "stop the running daemon",
        description="Stop the daemon of this state directory (SIGTERM, then wait). Jobs keep"
        " running; the next command starts a daemon again and picks them up.",
        epilog="examples:\n  tenantry stop\n  tenantry stop --timeout 60 --json",
    ) as p:
        p.add_argument("--timeout", type=float, default=30.0, help="seconds to wait (default 30)")
    with command(
        sub,
        "doctor",
        _doctor,
        "check the socket, state, backend, Slurm, agents and sandbox; say what to fix",
        epilog="examples:\n  tenantry doctor\n  tenantry doctor --json",
    ):
        pass


def daemon_pid(settings: Settings) -> int:
    """The pid of this state directory's running daemon, or 0."""
    try:
        pid = int((Path(settings.state_dir) / "daemon.lock").read_text().strip() or 0)
    except (OSError, ValueError):
        return 0
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            argv = fh.read().split(b"\0")
    except OSError:
        return 0
    return pid if b"serve" in argv and any(b"tenantry" in a for a in argv) else 0


def stop(settings: Settings, timeout: float) -> int:
    """Stop the daemon; its former pid (0 if none ran)."""
    pid = daemon_pid(settings)
    if not pid:
        return 0
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return pid
    except PermissionError as exc:
        raise errors.PermissionDenied(f"cannot signal the daemon (pid {pid})") from exc
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return pid
        time.sleep(0.05)
    raise errors.Unavailable(
        f"the daemon (pid {pid}) is still running after {timeout:g} s",
        hint=f"look at {Path(settings.state_dir) / 'daemon.log'}; `kill -9 {pid}` as a last resort",
    )


def _stop(args: argparse.Namespace) -> int:
    settings = settings_from(args)
    pid = stop(settings, args.timeout)
    emit(
        args,
        {"stopped": bool(pid), "pid": pid, "state_dir": settings.state_dir},
        lambda d: (
            f"tenantry: stopped the daemon (pid {pid})" if pid else "tenantry: no daemon runs"
        ),
    )
    return 0


def _check(name: str, ok: bool, detail: str, fix: str = "") -> dict[str, Any]:
    return {"check": name, "ok": ok, "detail": detail, "fix": "" if ok else fix}


def checks(settings: Settings) -> list[dict[str, Any]]:
    from tenantry.client.sync import socket_answers

    out = []
    state = Path(settings.state_dir)
    existing = next((p for p in (state, *state.parents) if p.exists()), Path("/"))
    writable = existing.is_dir() and os.access(existing, os.W_OK | os.X_OK)
    out.append(
        _check(
            "state",
            writable,
            str(state),
            "point TENANTRY_STATE_DIR (or --state-dir) at a directory you can write",
        )
    )
    up = socket_answers(settings.socket)
    out.append(
        _check(
            "daemon",
            True,
            f"answers on {settings.socket}" if up else "not running (commands start it)",
        )
    )
    out.append(_check("backend", settings.backend in ("local", "slurm"), settings.backend))
    if settings.backend == "slurm" or shutil.which("sbatch"):
        missing = [c for c in ("sbatch", "squeue", "sacct", "scancel") if not shutil.which(c)]
        out.append(
            _check(
                "slurm",
                not missing,
                "commands found" if not missing else f"missing: {', '.join(missing)}",
                "put the Slurm client commands on PATH, or use TENANTRY_BACKEND=local",
            )
        )
    bwrap = shutil.which("bwrap")
    out.append(
        _check(
            "sandbox",
            bwrap is not None,
            bwrap or "bubblewrap (bwrap) not found",
            "install bubblewrap (Debian: apt-get install bubblewrap) to sandbox commands",
        )
    )
    out.extend(_agents())
    return out


_FLAG = {"user": "--user", "project": "--project ."}


def _agents() -> list[dict[str, Any]]:
    from tenantry.agents.installer import plan, target

    out = []
    for scope in ("user", "project"):
        t = target(scope)
        for agent in ("claude-code", "codex", "gemini-cli", "opencode", "cursor"):
            try:  # what install would change: a config that differs from ours, or is unreadable
                p = plan(agent, t)
            except errors.TenantryError as err:
                out.append(_check(f"agent {agent} ({scope})", False, err.message))
                continue
            pending = p.pending
            if len(pending) < len(p.changes):  # something of ours is there
                stale = ", ".join(f"{c.path} ({c.action})" for c in pending)
                out.append(
                    _check(
                        f"agent {agent} ({scope})",
                        not pending,
                        "installed" if not pending else f"partly installed or outdated: {stale}",
                        f"tenantry install --agent {agent} {_FLAG[scope]} (review with --dry-run)",
                    )
                )
    if not out:
        out.append(
            _check("agents", True, "no agent configured (tenantry install --agent NAME --user)")
        )
    return out


def _doctor(args: argparse.Namespace) -> int:
    results = checks(settings_from(args))

    def human(rows: list[dict[str, Any]]) -> str:
        lines = []
        for r in rows:
            mark = "ok  " if r["ok"] else "FIX "
            lines.append(f"{mark}{r['check']:28} {r['detail']}")
            if r["fix"]:
                lines.append(f"    -> {r['fix']}")
        return "\n".join(lines)

    emit(args, results, human)
    sys.stdout.flush()
    return 0 if all(r["ok"] for r in results) else 1
