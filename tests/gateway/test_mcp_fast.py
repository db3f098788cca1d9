"""The MCP shim's run_command hot path: the SDK's answers, without the SDK per call.

The measured cost: 3.8-5.4 ms per ``run_command`` in the shim (httpx, pydantic,
middleware, worker-thread hops). Plainly valid calls are answered by
``gateway.mcp_fast``; everything else still goes to the SDK.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from tenantry.gateway.mcp import Forwarder, build_server
from tenantry.gateway.mcp_fast import FastRunCommand, run_params

from .conftest import Daemon

VOLATILE = {"id", "duration_s", "cpu_s", "max_rss_kb"}


def _stable(result: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in result.items() if k not in VOLATILE}


async def _fast(fwd: Forwarder, msg: dict[str, Any]) -> tuple[bool, list[dict[str, Any]]]:
    written: list[dict[str, Any]] = []

    async def write(text: str) -> None:
        written.append(json.loads(text))

    fast = FastRunCommand(fwd, write)
    took = fast.take(msg)
    await fast.drain()
    return took, written


async def test_fast_answer_equals_the_sdks(daemon: Daemon, tmp_path: Path) -> None:
    args = {"argv": ["sh", "-c", "echo hi; echo err >&2; exit 3"], "cwd": str(tmp_path)}
    fwd = Forwarder(daemon.settings)
    try:
        msg = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
               "params": {"name": "run_command", "arguments": args}}  # fmt: skip
        took, written = await _fast(fwd, msg)
        assert took and len(written) == 1 and written[0]["id"] == 7
        fast = written[0]["result"]
        async with Client(build_server(daemon.settings)) as client:
            sdk = await client.call_tool("run_command", args)
        assert fast["isError"] is False and sdk.is_error is False
        assert sdk.structured_content is not None
        assert _stable(fast["structuredContent"]) == _stable(sdk.structured_content)
        assert _stable(json.loads(fast["content"][0]["text"])) == _stable(
            json.loads(sdk.content[0].text)  # type: ignore[union-attr]
        )
        assert fast["structuredContent"]["stdout_tail"] == "hi\n"
    finally:
        await fwd.client.aclose()


async def test_daemon_errors_read_as_the_sdks(daemon: Daemon, tmp_path: Path) -> None:
    args = {"argv": ["true"], "cwd": str(tmp_path / "missing")}
    fwd = Forwarder(daemon.settings)
    try:
        msg = {"jsonrpc": "2.0", "id": "a", "method": "tools/call",
               "params": {"name": "run_command", "arguments": args}}  # fmt: skip
        took, written = await _fast(fwd, msg)
        async with Client(build_server(daemon.settings)) as client:
            sdk = await client.call_tool("run_command", args)
        assert took and written[0]["result"]["isError"] is True and sdk.is_error
        assert written[0]["result"]["content"][0]["text"] == sdk.content[0].text  # type: ignore[union-attr]
    finally:
        await fwd.client.aclose()


def test_anything_unusual_is_left_to_the_sdk() -> None:
    assert run_params({"argv": ["true"]}) is not None
    bad: object
    for bad in (
        {"argv": []},
        {"argv": "true"},
        {"argv": ["true", 1]},
        {"argv": ["true"], "cpus": True},
        {"argv": ["true"], "cpus": 0},
        {"argv": ["true"], "timeout_s": 0},
        {"argv": ["true"], "where": "moon"},
        {"argv": ["true"], "idempotent": "yes"},
        {"argv": ["true"], "surprise": 1},
        None,
    ):
        assert run_params(bad) is None, bad


def test_environment_is_decoded_once_until_it_changes(
    daemon: Daemon, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Measured: rebuilding ``dict(os.environ)`` per call was the shim's largest own cost."""
    fwd = Forwarder(daemon.settings)
    first = fwd.environ()
    assert first == dict(os.environ)
    assert fwd.environ() is first  # unchanged: the same snapshot, nothing decoded again
    run = run_params({"argv": ["true"]}, fwd.environ())
    assert run is not None and run["env"] is first
    monkeypatch.setenv("TENANTRY_TEST_ENV_CHANGED", "1")
    changed = fwd.environ()
    assert changed is not first and changed["TENANTRY_TEST_ENV_CHANGED"] == "1"
    monkeypatch.delenv("TENANTRY_TEST_ENV_CHANGED")
    assert "TENANTRY_TEST_ENV_CHANGED" not in fwd.environ()


def test_agent_process_is_found_once(daemon: Daemon, monkeypatch: pytest.MonkeyPatch) -> None:
    """Measured: walking /proc for the agent process on every call (five reads each)."""
    from tenantry.agents import agent_session

    walks: list[int] = []

    def walk(pid: int | None = None) -> str:
        walks.append(1)
        return "4242-17"

    monkeypatch.setattr(agent_session, "agent_process", walk)
    sessions = daemon.settings.state_path / "agent-sessions"
    fwd = Forwarder(daemon.settings)
    fwd._told = False
    fwd._claim_session()
    assert fwd.client.claims.get("session", "") == ""  # nothing recorded yet
    agent_session.record(str(sessions), "codex", "s-123", key="4242-17")
    try:
        fwd._claim_session()  # recorded after the first call (the hook ran later): found
        assert fwd.client.claims["session"] == "s-123"
        assert fwd.client.claims["agent"] in ("codex", fwd.client.claims["agent"])
    finally:
        agent_session.forget(str(sessions), key="4242-17")
    assert len(walks) == 1
