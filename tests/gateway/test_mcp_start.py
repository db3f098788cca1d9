"""`tenantry mcp` answers initialize before importing the SDK, exactly as the SDK would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from tenantry.gateway import mcp_start

SRC = Path(__file__).resolve().parents[2] / "src"


def test_handshake_versions_match_the_sdk() -> None:
    assert mcp_start.HANDSHAKE_VERSIONS == HANDSHAKE_PROTOCOL_VERSIONS


def _init(rid: object, version: str) -> str:
    params = {
        "protocolVersion": version,
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"},
    }
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": "initialize", "params": params})


def _sdk_initialize(version: str, tmp_path: Path) -> dict[str, Any]:
    """The official SDK's own answer: its stdio loop, without the fast start."""
    env = {**os.environ, "PYTHONPATH": str(SRC), "TENANTRY_SOCKET": str(tmp_path / "none")}
    code = (
        "from tenantry.gateway.mcp_stdio import run_stdio; from tenantry.core.settings import load;"
        "run_stdio(load())"
    )
    r = subprocess.run(
        [sys.executable, "-c", code],
        input=_init(7, version) + "\n",
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    reply: dict[str, Any] = json.loads(r.stdout.splitlines()[0])
    return reply


@pytest.mark.parametrize("version", [*HANDSHAKE_PROTOCOL_VERSIONS, "1999-01-01"])
def test_fast_answer_is_the_sdks_answer(version: str, tmp_path: Path) -> None:
    sdk = _sdk_initialize(version, tmp_path)
    assert sdk["result"] == mcp_start.initialize_result(version)


def _shim(tmp_path: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(SRC), "TENANTRY_SOCKET": str(tmp_path / "none")}
    env["TENANTRY_STATE_DIR"] = str(tmp_path / "state")
    return subprocess.Popen(
        [sys.executable, "-m", "tenantry", "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
    )


def test_whole_conversation_after_the_fast_answer(tmp_path: Path) -> None:
    p = _shim(tmp_path)
    assert p.stdin is not None and p.stdout is not None
    try:
        t0 = time.perf_counter()
        p.stdin.write((_init(1, "2025-06-18") + "\n").encode())
        p.stdin.flush()
        first = json.loads(p.stdout.readline())
        elapsed = time.perf_counter() - t0
        assert first["id"] == 1 and first["result"]["serverInfo"]["name"] == "tenantry"
        # a generous bound for a loaded machine; bench/gateway.md has the measured numbers
        assert elapsed < 5, elapsed
        lines = [
            json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            "this is not json",
            json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        ]
        p.stdin.write(("\n".join(lines) + "\n").encode())
        p.stdin.flush()
        got = [json.loads(p.stdout.readline()) for _ in range(2)]
        p.stdin.close()
        rest = p.stdout.read().decode()
    finally:
        p.wait(timeout=30)
    by_id = {json.dumps(m.get("id")): m for m in got}
    assert by_id["null"]["error"]["code"] == -32700
    assert len(by_id["2"]["result"]["tools"]) >= 18
    assert rest.strip() == "", f"a second initialize answer or stray output: {rest!r}"


def _list_tools_once(tmp_path: Path) -> tuple[dict[str, Any], float, str]:
    """(tools/list answer, seconds from start to it, anything else printed) of one shim."""
    p = _shim(tmp_path)
    assert p.stdin is not None and p.stdout is not None
    t0 = time.perf_counter()
    msgs = [
        _init(1, "2025-06-18"),
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    ]
    p.stdin.write(("\n".join(msgs) + "\n").encode())
    p.stdin.flush()
    answers = [json.loads(p.stdout.readline()) for _ in range(2)]
    elapsed = time.perf_counter() - t0
    p.stdin.close()
    rest = p.stdout.read().decode()
    p.wait(timeout=30)
    assert [a["id"] for a in answers] == [1, 2]
    return answers[1], elapsed, rest


def test_tools_list_is_answered_from_the_sdks_last_answer(tmp_path: Path) -> None:
    cold, _, rest = _list_tools_once(tmp_path)
    assert rest.strip() == ""
    assert (tmp_path / "state" / "mcp-tools.json").exists()
    warm, _, rest = _list_tools_once(tmp_path)
    assert rest.strip() == "", f"the SDK's answer leaked too: {rest!r}"
    assert warm == cold
    # a stale cache (another version or changed tool modules) is not used
    cache = tmp_path / "state" / "mcp-tools.json"
    data = json.loads(cache.read_text())
    cache.write_text(json.dumps({"key": "old", "result": {"tools": []}}))
    fresh, _, _ = _list_tools_once(tmp_path)
    assert fresh == cold and json.loads(cache.read_text())["key"] == data["key"]
