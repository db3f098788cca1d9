"""What the benchmarks share: the checkout, the CPU time of finished child processes, the
environment of a throw-away daemon state directory, a daemon, and percentiles."""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parents[1]


def small_workspace(ws: Path) -> None:
    """The workspace the ``find`` benchmarks index: 20 directories of 25 ``.py`` files."""
    for d in range(20):
        sub = ws / f"pkg{d}"
        sub.mkdir(parents=True)
        for f in range(25):
            (sub / f"m{f}.py").write_text(f"def f{f}():\n    return {d * f}\n")


def child_cpu() -> float:
    """CPU seconds (user + system) of every child process that has exited so far."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def bench_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this environment) with this checkout's ``src`` on PYTHONPATH and
    the daemon's state and socket in a fresh temporary directory."""
    state = tempfile.mkdtemp(prefix="tnt-bench-")
    return {
        **(dict(os.environ) if base is None else base),
        "PYTHONPATH": str(ROOT / "src"),
        "TENANTRY_STATE_DIR": state,
        "TENANTRY_SOCKET": f"{state}/sock",
    }


def serve(env: dict[str, str], log: IO[bytes] | None = None) -> subprocess.Popen[bytes]:
    """``tenantry serve`` in its own session, its output to ``log`` (default: discarded)."""
    out: IO[bytes] | int = subprocess.DEVNULL if log is None else log
    return subprocess.Popen(
        [sys.executable, "-m", "tenantry", "serve"],
        env=env,
        stdout=out,
        stderr=out,
        start_new_session=True,
    )


def pct(xs: list[float], q: float) -> float:
    """The ``q`` quantile (0-1) of ``xs`` by nearest rank; NaN for no samples."""
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def parser(doc: str | None) -> argparse.ArgumentParser:
    """A bench's command line: its docstring as the help, and ``--json FILE``."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--json", help="also write the results here, as JSON")
    return ap
