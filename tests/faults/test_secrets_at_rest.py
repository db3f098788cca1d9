"""A secret in a command's output, argv and environment is nowhere in the state directory."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

gw: Any = sys.modules["_tenantry_gateway_test_helpers"]  # loaded by tests/conftest.py

SECRET = "ghp_" + "Z7q" * 12  # shaped like a GitHub token: the guard's rules know it
ENV_SECRET = "s3cr3t-env-value-Hq8vX2"  # no known shape: kept out by the env allow-list


def test_planted_secrets_appear_nowhere_at_rest(
    fault_daemon: Callable[..., Any], tmp_path: Path
) -> None:
    d = fault_daemon()
    c = d.client(agent="claude-code", session="leak")
    env = {"PATH": "/usr/bin:/bin", "MY_API_TOKEN": ENV_SECRET, "GH": SECRET}
    # a command with the secret in its argv and its output (both streams)
    params = {
        "argv": ["/bin/sh", "-c", f"echo {SECRET}; echo {SECRET} >&2; exit 3", SECRET],
        "cwd": str(tmp_path),
        "env": env,
        "where": "local",
    }
    chunks = list(c.stream("commands.run", params))
    assert chunks[-1]["result"]["exit_code"] == 3
    # a job with the secret in its environment (a job's own arguments are kept:
    # it must be able to run after a crash, see docs/faults.md)
    script = tmp_path / "job.sh"
    script.write_text('#!/bin/sh\necho "$1" "$MY_API_TOKEN"\n')
    job = c.call(
        "jobs.submit",
        {
            "script": str(script),
            "script_text": script.read_text(),
            "args": ["plain"],
            "cwd": str(tmp_path),
            "env": env,
        },
    )["job"]["id"]
    gw.wait_for(
        lambda: c.call("jobs.status", {"ids": [job]})["jobs"][0]["terminal"], what="job end"
    )
    c.call("events.list", {})  # flushes telemetry to disk
    d.stop()
    found = []
    for f in Path(d.state).rglob("*"):
        if f.is_file() and not f.is_symlink():
            data = f.read_bytes()
            for s in (SECRET, ENV_SECRET):
                if s.encode() in data:
                    found.append(f"{f.relative_to(d.state)}: {s[:8]}...")
    assert not found, found
