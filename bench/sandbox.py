"""Cost of a sandboxed agent session: start, and one command inside vs outside.

Measures, with a real daemon in a temporary state dir (p50 of --n runs each):

- ``bare``            fork/exec of ``/bin/true`` (the floor);
- ``bwrap``           ``/bin/true`` under the profile's bubblewrap argv, no daemon;
- ``session_start``   ``tenantry agent -- /bin/true``: register, shims, bwrap, attach, end;
- ``run_outside``     ``tenantry run -- /bin/true`` from the user's shell;
- ``run_inside``      the same from inside a session (its command is confined too).

Usage: .venv/bin/python bench/sandbox.py [--n 20] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def timed(argv: list[str], env: dict[str, str], cwd: str) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, env=env, cwd=cwd, check=True, capture_output=True)
    return time.perf_counter() - t0


def p50(xs: list[float]) -> float:
    return round(statistics.median(xs) * 1000, 2)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    tenantry = [sys.executable, "-m", "tenantry"]
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ)
        env.update(TENANTRY_STATE_DIR=f"{tmp}/state", TENANTRY_SOCKET=f"{tmp}/run/sock")
        proj = Path(tmp) / "proj"
        proj.mkdir()
        cwd = str(proj)
        subprocess.run([*tenantry, "sessions"], env=env, check=True, capture_output=True)
        from tenantry.safety.sandbox import profile
        from tenantry.safety.sandbox.bwrap import find_bwrap

        paths = profile.SessionPaths(
            home=os.path.expanduser("~"),
            project=cwd,
            state_dir=f"{tmp}/state",
            session_dir=f"{tmp}/run",
            inside_runtime=profile.FALLBACK_RUNTIME,
        )
        box = profile.bwrap_argv(find_bwrap(), paths, ["/bin/true"], {"PATH": "/usr/bin:/bin"})
        inner = [*tenantry, "agent", "--quiet", "--"]
        cases = {
            "bare": ["/bin/true"],
            "bwrap": box,
            "session_start": [*inner, "/bin/true"],
            "run_outside": [*tenantry, "run", "--", "/bin/true"],
        }
        out: dict[str, float] = {}
        for name, argv in cases.items():
            timed(argv, env, cwd)  # warm up
            out[name] = p50([timed(argv, env, cwd) for _ in range(args.n)])
        # inside: one session running the command n times, timing each from inside
        loop = (
            "import subprocess,time,json;ts=[]\n"
            f"for _ in range({args.n + 1}):\n"
            " t=time.perf_counter();subprocess.run(['tenantry','run','--','/bin/true'],check=True)"
            ";ts.append(time.perf_counter()-t)\n"
            "print(json.dumps(ts[1:]))"
        )
        res = subprocess.run(
            [*inner, sys.executable, "-I", "-c", loop],
            env=env, cwd=cwd, check=True, capture_output=True, text=True,
        )  # fmt: skip
        out["run_inside"] = p50(json.loads(res.stdout.strip().splitlines()[-1]))
        subprocess.run([*tenantry, "stop"], env=env, capture_output=True, check=False)
        lock = Path(tmp) / "state" / "daemon.lock"
        if lock.exists() and lock.read_text().strip().isdigit():
            os.kill(int(lock.read_text()), 15)
    result = {"p50_ms": out, "n": args.n, "loadavg": os.getloadavg(), "cpus": os.cpu_count()}
    print(json.dumps(result, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
