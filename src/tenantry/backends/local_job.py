"""The wrapper that runs one local batch job: ``python -m tenantry.backends.local_job DIR``.

It reads ``DIR/job.json``, runs the script with its arguments (argv list, in
its own process group, output to the job's files), enforces the time limit,
and writes ``DIR/status.json`` atomically when the job ends. Because the
status lands on disk, a daemon that crashed and restarts learns the true end
state of jobs that finished while it was down.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, BinaryIO


def write_status(job_dir: Path, status: dict[str, Any]) -> None:
    tmp = job_dir / "status.json.tmp"
    tmp.write_text(json.dumps(status))
    os.replace(tmp, job_dir / "status.json")


def _private_append(path: str) -> BinaryIO:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    return os.fdopen(fd, "ab")


def main(job_dir_arg: str) -> int:
    job_dir = Path(job_dir_arg)
    job = json.loads((job_dir / "job.json").read_text())
    started = time.time()
    write_status(job_dir, {"state": "RUNNING", "started_at": started, "pid": os.getpid()})
    # output files are private (0600): job output often holds what agents must not share
    out = _private_append(job["output"])
    err = _private_append(job["error"]) if job.get("error") else out
    env = dict(job["env"])
    try:
        proc = subprocess.Popen(
            [job["script"], *job["args"]],
            cwd=job["cwd"],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
        )
    except OSError as exc:
        err.write(f"tenantry: cannot start the job script: {exc}\n".encode())
        err.flush()
        write_status(
            job_dir,
            {
                "state": "FAILED",
                "exit_code": 127,
                "started_at": started,
                "ended_at": time.time(),
                "reason": f"cannot start the script: {exc.strerror}",
            },
        )
        return 0

    def forward(signum: int, _frame: object) -> None:
        proc.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    limit = job.get("time_s")
    state, reason = "COMPLETED", ""
    try:
        code = proc.wait(timeout=limit)
    except subprocess.TimeoutExpired:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        code = proc.returncode
        state, reason = "TIMEOUT", f"time limit of {limit} s reached"
    if state == "COMPLETED" and code != 0:
        state = "FAILED"
        if code < 0:
            reason = f"killed by signal {signal.Signals(-code).name}"
    write_status(
        job_dir,
        {
            "state": state,
            "exit_code": code,
            "started_at": started,
            "ended_at": time.time(),
            "reason": reason,
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
