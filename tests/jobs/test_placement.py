"""A job's partition, node list and working directory reach the shims (local backend)."""

from __future__ import annotations

import io
import json
import socket
from pathlib import Path
from typing import Any

from tenantry.agents.shims.run import dispatch

from ..gateway.conftest import wait_for


def test_squeue_shim_shows_partition_node_and_work_dir(start_daemon: Any, tmp_path: Path) -> None:
    d = start_daemon()
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/sh\nsleep 20\n")
    r = d.cli("submit", "--json", str(script), cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    job = json.loads(r.stdout)["job"]
    client = d.client(agent="claude-code", session="s1")

    def running() -> bool:
        (j,) = client.call("jobs.status", {"ids": [job["id"]]})["jobs"]
        return bool(j["state"] == "RUNNING" and j["nodes"])

    wait_for(running, 20, "the job to run")

    out = io.StringIO()
    rc = dispatch("squeue", ["-h", "-o", "%P|%N|%Z"], env={}, call=client.call, out=out)
    assert rc == 0
    host = socket.gethostname().split(".")[0]
    assert out.getvalue().strip() == f"local|{host}|{tmp_path}"
    d.cli("cancel", job["id"])
