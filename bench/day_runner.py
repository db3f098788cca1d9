"""One actor of the facility day: run a schedule of commands on time and log each one.

``python day_runner.py SPEC.json`` (standard library only; the orchestrator
starts it as the actor's Unix user). SPEC holds ``t0`` (epoch start of the
day), ``env``, ``cwd``, ``log`` (where to write JSON lines), an optional
``hook`` argv (the agent's pre-tool hook, run with the agent's JSON payload
before each command; a ``deny`` answer skips the command, and one whose
reason begins "Tenantry answered" stands for it: the hook answered in its
place), an optional ``hook_url`` (Claude Code's http hook: the payload is POSTed there instead, as
the agent's own process does, and ``hook`` runs only for steps marked
``hook_if``: the installed fallback's ``if`` patterns match, started at the same
time as the POST, as Claude Code runs a tool call's hooks, the stricter verdict
deciding; an http hook that gets no answer lets the command through, as in
Claude Code), and ``steps``:
``{"t", "cls", "argv"}`` or ``{"t", "cls", "write": PATH}`` (an edit). A step
may carry a ``fallback`` argv: what the agent runs instead when the hook
denies the command (the Tenantry command its redirect names).

Each payload is Claude Code's: ``session_id``, ``cwd``, a fresh ``tool_use_id``
and ``permission_mode`` ``bypassPermissions`` (an agent that runs its commands
without asking anyone, as on a batch system).

A step runs at ``t0 + t``, or at once when the previous one overran (the
actor falls behind, as a session waiting on a slow file system does). The
last line of the log is the process tree's CPU time (``rusage``).
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from typing import Any

TIMEOUT_S = 180.0


ANSWERED = "Tenantry answered"  # a denial whose reason is the command's answer (the hook's)


def _verdict(answer: Any) -> str:
    """``deny``, ``answered`` (the hook answered in the command's place) or ``""``."""
    spec = answer.get("hookSpecificOutput", {}) if isinstance(answer, dict) else {}
    if not isinstance(spec, dict) or spec.get("permissionDecision") != "deny":
        return ""
    return (
        "answered" if str(spec.get("permissionDecisionReason", "")).startswith(ANSWERED) else "deny"
    )


def _hook_start(
    hook: list[str], env: dict[str, str], cwd: str, body: bytes
) -> subprocess.Popen[str] | None:
    """Start the command hook with the payload on its stdin (None: it could not start)."""
    try:
        proc = subprocess.Popen(
            hook, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, env=env, cwd=cwd,
        )  # fmt: skip
    except OSError:
        return None
    return proc


def _hook_verdict(proc: subprocess.Popen[str] | None, body: bytes) -> str:
    """The started command hook's verdict once it ends (it fails closed)."""
    if proc is None:
        return "deny"
    try:
        stdout, _ = proc.communicate(body.decode(), timeout=TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        proc.kill()
        proc.wait()
        return "deny"
    if proc.returncode == 2:
        return "deny"
    try:
        return _verdict(json.loads(stdout) if stdout.strip() else {})
    except ValueError:
        return ""


def _hook_denies(hook: list[str], env: dict[str, str], cwd: str, body: bytes) -> str:
    return _hook_verdict(_hook_start(hook, env, cwd, body), body)


def _stricter(a: str, b: str) -> str:
    """Two hooks' verdicts on one tool call: a denial wins, then an answer."""
    for verdict in ("deny", "answered"):
        if verdict in (a, b):
            return verdict
    return ""


def _payload(cwd: str, command: str, sid: str) -> bytes:
    """One tool call's PreToolUse payload (its http and command hooks get the same one)."""
    import uuid

    return json.dumps(
        {
            "hook_event_name": "PreToolUse",
            "session_id": sid,
            "cwd": cwd,
            "permission_mode": "bypassPermissions",
            "tool_name": "Bash",
            "tool_input": {"command": command},
            "tool_use_id": f"toolu_{uuid.uuid4().hex}",
        }
    ).encode()


def _http_denies(url: str, body: bytes) -> str:
    """One http hook call on a fresh loopback connection; no answer lets the command run."""
    import socket
    import urllib.parse

    u = urllib.parse.urlsplit(url)
    head = (
        f"POST {u.path} HTTP/1.1\r\nHost: {u.netloc}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    try:
        with socket.create_connection((u.hostname, u.port), timeout=TIMEOUT_S) as s:
            s.sendall(head.encode() + body)
            out = b""
            while chunk := s.recv(65536):
                out += chunk
    except OSError:
        return ""  # Claude Code: a non-blocking hook error
    top, _, rest = out.partition(b"\r\n\r\n")
    if not top.startswith(b"HTTP/1.1 200"):
        return ""
    try:
        return _verdict(json.loads(rest) if rest.strip() else {})
    except ValueError:
        return ""


def _run(step: dict[str, Any], env: dict[str, str], cwd: str) -> int:
    if "write" in step:
        with open(step["write"], "a", encoding="utf-8") as f:
            f.write(f"# edit at {time.time():.3f}\nvalue = {len(step['write'])}\n")
        return 0
    try:
        out = subprocess.run(
            step["argv"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            env=env,
            cwd=cwd,
            timeout=TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return 124
    except OSError:
        return 127
    return out.returncode


def main(path: str) -> int:
    with open(path, encoding="utf-8") as f:
        spec = json.load(f)
    env: dict[str, str] = spec["env"]
    cwd: str = spec["cwd"]
    hook: list[str] | None = spec.get("hook")
    hook_url: str = spec.get("hook_url", "")
    sid: str = spec.get("session", "")
    rows: list[dict[str, Any]] = []
    for step in spec["steps"]:
        delay = spec["t0"] + step["t"] - time.time()
        if delay > 0:
            time.sleep(delay)
        ts = time.time()
        t = time.perf_counter()
        verdict = ""
        hook_s = 0.0
        body = _payload(cwd, " ".join(step.get("argv") or ()), sid)
        if hook_url and "argv" in step:  # the http hook, and the fallback where it matches
            # Claude Code runs a tool call's matching hooks at once and waits for all of them
            fallback = hook if hook and step.get("hook_if") else None
            proc = _hook_start(fallback, env, cwd, body) if fallback else None
            verdict = _http_denies(hook_url, body)
            if fallback:
                verdict = _stricter(verdict, _hook_verdict(proc, body))
            hook_s = time.perf_counter() - t
        elif hook and "argv" in step:  # the agent's Bash tool; edits use its Edit tool
            verdict = _hook_denies(hook, env, cwd, body)
            hook_s = time.perf_counter() - t
        fell_back = verdict == "deny" and bool(step.get("fallback"))
        denied = verdict == "deny" and not fell_back
        if fell_back:  # the agent runs what the redirect named
            rc = _run({"argv": step["fallback"]}, env, cwd)
        else:
            rc = -1 if denied else 0 if verdict == "answered" else _run(step, env, cwd)
        rows.append(
            {
                "cls": step["cls"],
                "ts": ts,
                "lag_s": round(ts - spec["t0"] - step["t"], 3),
                "latency_s": round(time.perf_counter() - t, 6),
                "hook_s": round(hook_s, 6),
                "rc": rc,
                "denied": denied,
                "answered": verdict == "answered",
                "fell_back": fell_back,
                "via_tenantry": bool(step.get("via_tenantry")),
            }
        )
    own, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    cpu = own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime
    with open(spec["log"], "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
        f.write(json.dumps({"cpu_s": round(cpu, 3)}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
