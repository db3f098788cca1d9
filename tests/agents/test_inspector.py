"""The MCP Inspector CLI (the reference MCP client) lists and calls every Tenantry tool."""

from __future__ import annotations

import json
from typing import Any

import pytest
from tests.agents.harness import Sandbox, cli_path

pytestmark = [pytest.mark.agents, pytest.mark.slow]


def inspect(box: Sandbox, exe: str, method: str, tool: str = "", **args: Any) -> Any:
    # like most MCP clients, the Inspector passes a server only a few variables
    pinned = []
    for k in ("TENANTRY_STATE_DIR", "TENANTRY_SOCKET", "PYTHONPATH"):
        pinned += ["-e", f"{k}={box.env[k]}"]
    argv = [exe, "--cli", *pinned, "--method", method]
    if tool:
        argv += ["--tool-name", tool]
        for k, v in args.items():
            argv += ["--tool-arg", f"{k}={v if isinstance(v, str) else json.dumps(v)}"]
    argv += ["--", "tenantry", "mcp"]
    r = box.run(argv, timeout=120)
    assert r.returncode == 0, f"{method} {tool}: {r.stdout[-1500:]}{r.stderr[-1500:]}"
    return json.loads(r.stdout)


def test_lists_and_calls_every_tool(sandbox: Sandbox) -> None:
    exe = cli_path("mcp-inspector")
    work = sandbox.project / "src"
    work.mkdir()
    (work / "solver.py").write_text("def solve():\n    return 42\n")
    script = "#!/bin/bash\necho hello from the job\n"
    (sandbox.project / "job.sh").write_text(script)
    proj = str(sandbox.project)

    tools = {t["name"]: t for t in inspect(sandbox, exe, "tools/list")["tools"]}
    for name, tool in tools.items():
        assert tool.get("description"), name
        assert tool["inputSchema"]["type"] == "object", name

    def call(tool: str, **args: Any) -> dict[str, Any]:
        res = inspect(sandbox, exe, "tools/call", tool, **args)
        assert not res.get("isError"), f"{tool}: {res}"
        out: dict[str, Any] = res["structuredContent"]
        return out

    called: list[str] = []

    def ok(tool: str, **args: Any) -> dict[str, Any]:
        called.append(tool)
        return call(tool, **args)

    assert ok("run_command", argv=["echo", "hi"], cwd=proj)["stdout_tail"] == "hi\n"
    assert ok("facility_info")["backend"] == "local"
    job = ok("submit_job", script="job.sh", script_text=script, cwd=proj, time="5")["job"]["id"]
    done = ok("wait_job", id=job, timeout_s=60)
    assert '"COMPLETED"' in json.dumps(done), done
    assert ok("job_status", ids=[job])["jobs"][0]["id"] == job
    assert [j["id"] for j in ok("list_jobs", limit=10)["jobs"]] == [job]
    assert "hello from the job" in json.dumps(ok("job_logs", id=job))
    ok("cancel_job", id=job)  # a finished job: a no-op
    ok("remember", title="solver needs 42", body="the solver returns 42", kind="fact")
    ok("recall", query="solver")
    ok("index_workspace", path=proj, wait=True)
    for tool, args in {
        "find_files": {"path": proj, "name": "*.py"},
        "grep_files": {"pattern": "solve", "path": proj},
        "list_dir": {"path": proj},
        "stat_path": {"path": str(work / "solver.py")},
        "disk_usage": {"path": proj},
        "tree": {"path": proj},
        "recent_files": {"path": proj},
    }.items():
        ok(tool, **args)
    assert sorted(called) == sorted(tools), set(tools) ^ set(called)
