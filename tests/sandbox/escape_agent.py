"""A scripted "agent" that tries every escape of the sandbox profile.

Run inside ``tenantry agent``; prints one JSON object per attempt:
``{"name", "escaped": bool, "message"}``. Standard library only.
Arguments: the host state dir, the host user-socket path, the launcher's pid.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

STATE, USER_SOCK, LAUNCHER_PID = sys.argv[1], sys.argv[2], int(sys.argv[3])
results: list[dict[str, object]] = []


def report(name: str, escaped: bool, message: str) -> None:
    results.append({"name": name, "escaped": escaped, "message": message.strip()[-300:]})


def tenantry(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = dict(os.environ) | (env or {})
    return subprocess.run(["tenantry", *args], capture_output=True, text=True, env=full)


def try_read(name: str, path: str) -> None:
    try:
        with open(path, "rb") as fh:
            data = fh.read(64)
        report(name, bool(data), f"read {len(data)} bytes of {path}")
    except OSError as exc:
        report(name, False, f"{path}: {exc.strerror}")


def try_write(name: str, path: str) -> None:
    try:
        with open(path, "a") as fh:
            fh.write("x\n")
        report(name, True, f"wrote {path}")
    except OSError as exc:
        report(name, False, f"{path}: {exc.strerror}")


# 1. claim to be a human / another session: identity comes from the socket
r = tenantry("sessions", "--json", env={"TENANTRY_AGENT": "human", "TENANTRY_SESSION": "fresh-1"})
rows = json.loads(r.stdout)["sessions"] if r.returncode == 0 else []
forged = [s for s in rows if s["session"] == "fresh-1"]
mine = {(s["agent"], s["session"]) for s in rows}
report(
    "claim human + new session id",
    bool(forged) or r.returncode != 0,
    f"answered as {sorted(mine)}; the claim was ignored" if rows else r.stderr,
)
r = tenantry("admin", "stop-user", "nobody", env={"TENANTRY_AGENT": "human"})
report("admin op as claimed human", r.returncode == 0, r.stderr)
# 2. resume itself
r = tenantry("admin", "resume-session", os.environ.get("TENANTRY_SESSION", "x"))
report("resume itself", r.returncode == 0, r.stderr)
r = tenantry("agent", "--", "true")
report("register a fresh session", r.returncode == 0, r.stderr)
# 3. secrets and records under the state dir
for name, rel in (
    ("read audit key", "safety/audit/audit.key"),
    ("read dashboard token", "dashboard.token"),
    ("read memory db", "memory.sqlite3"),
    ("read main db", "tenantry.sqlite3"),
    ("read sessions registry", "safety/sandbox/sessions.json"),
):
    try_read(name, os.path.join(STATE, rel))
try:
    leases = os.listdir(os.path.join(STATE, "leases"))
    report("list lease secrets", bool(leases), str(leases))
except OSError as exc:
    report("list lease secrets", False, f"leases: {exc.strerror}")
# 4. rewrite / truncate the audit log and its anchor
try_write("append to the audit log", os.path.join(STATE, "audit", "audit.jsonl"))
try:
    os.truncate(os.path.join(STATE, "audit", "audit.jsonl"), 0)
    report("truncate the audit log", True, "truncated")
except OSError as exc:
    report("truncate the audit log", False, exc.strerror or str(exc))
try_write("rewrite the anchor", os.path.join(STATE, "audit", "audit.head"))
# 5. the real Slurm clients by absolute path: no MUNGE inside
for prog in ("/usr/bin/sbatch", "/usr/bin/scancel"):
    if os.path.exists(prog):
        args = [prog, "--wrap", "true"] if prog.endswith("sbatch") else [prog, "1"]
        p = subprocess.run(args, capture_output=True, text=True)
        report(f"real {os.path.basename(prog)}", p.returncode == 0, p.stderr)
try_read("read munge key", "/etc/munge/munge.key")
report("munge socket", os.path.exists("/run/munge/munge.socket.2"), "/run/munge/munge.socket.2")
# 6. pose as a pilot: needs a lease secret, which lives in the hidden state dir
report(
    "lease secret in the environment",
    any("LEASE" in k for k in os.environ),
    "environment names: " + ",".join(sorted(os.environ)),
)
# 7. escape the PID namespace
try:
    os.kill(LAUNCHER_PID, 0)
    report("signal a process outside", True, f"pid {LAUNCHER_PID} is reachable")
except ProcessLookupError:
    report("signal a process outside", False, f"pid {LAUNCHER_PID}: no such process here")
except PermissionError as exc:
    report("signal a process outside", False, str(exc))
pids = [p for p in os.listdir("/proc") if p.isdigit()]
report("see processes outside", len(pids) > 20, f"{len(pids)} pids visible")
# 8. the user's own socket and credentials, and writes outside the project
try:
    s = socket.socket(socket.AF_UNIX)
    s.connect(USER_SOCK)
    report("reach the user's socket", True, USER_SOCK)
except OSError as exc:
    report("reach the user's socket", False, f"{USER_SOCK}: {exc.strerror}")
home = os.path.expanduser("~")
try_read("read ~/.ssh/id_ed25519", os.path.join(home, ".ssh", "id_ed25519"))
try_read("read ~/.aws/credentials", os.path.join(home, ".aws", "credentials"))
try_write("write ~/.bashrc", os.path.join(home, ".bashrc"))
try_write("write /etc", "/etc/tenantry-escape")
try:
    others = [h for h in os.listdir("/home") if os.path.join("/home", h) != home]
    report("see other users' homes", bool(others), str(others))
except OSError as exc:
    report("see other users' homes", False, exc.strerror or "")
try_write("write in the project (allowed)", os.path.join(os.getcwd(), "ok.txt"))
# 9. have the daemon run it: commands of a sandboxed session run under the profile
r = tenantry("run", "--where", "local", "--", "/bin/ls", "-A", os.path.join(STATE, "audit"))
listed = r.stdout.strip()
report("list the audit dir via tenantry run", bool(listed), listed or r.stderr or "empty")
r = tenantry("run", "--where", "local", "--", "/bin/grep", "NSpid", "/proc/self/status")
words = r.stdout.split()
pid = int(words[1]) if len(words) > 1 and words[1].isdigit() else 0
report("tenantry run outside the PID namespace", not 0 < pid < 50, r.stdout or r.stderr)
print(json.dumps(results))
