"""A session's environment crosses the socket once; later commands name it by digest.

The measured cost: every MCP ``run_command`` sent the whole ``os.environ``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tenantry.client.wire import ENV_DIGEST, ENV_LATEST, env_digest
from tenantry.core.errors import EnvUnknown

from .conftest import Daemon


def _run(daemon: Daemon, params: dict[str, Any], **claims: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for chunk in daemon.client(**claims).stream("commands.run", params):
        out.update(chunk)
    return out["result"]  # type: ignore[no-any-return]


def test_a_digest_stands_for_the_environment_sent_before(daemon: Daemon, tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "TT_ONCE": "first-value"}
    argv = ["sh", "-c", 'echo "$TT_ONCE"']
    base = {"argv": argv, "cwd": str(tmp_path), "where": "local"}
    assert _run(daemon, {**base, "env": env})["stdout_tail"] == "first-value\n"
    res = _run(daemon, {**base, ENV_DIGEST: env_digest(env)})
    assert res["stdout_tail"] == "first-value\n" and res["exit_code"] == 0


def test_an_unknown_or_foreign_digest_is_refused(daemon: Daemon, tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "TT_ONCE": "owned-by-s1"}
    base = {"argv": ["true"], "cwd": str(tmp_path), "where": "local"}
    _run(daemon, {**base, "env": env}, session="tt-env-s1")
    with pytest.raises(EnvUnknown):  # another session cannot name s1's environment
        _run(daemon, {**base, ENV_DIGEST: env_digest(env)}, session="tt-env-s2")
    with pytest.raises(EnvUnknown):
        _run(daemon, {**base, ENV_DIGEST: "0" * 64})


def test_latest_names_the_environment_this_session_sent_last(
    daemon: Daemon, tmp_path: Path
) -> None:
    """What the daemon's hook submits an agent's sbatch with (``agents.hook``)."""
    base = {"argv": ["sh", "-c", 'echo "$TT_ONCE"'], "cwd": str(tmp_path), "where": "local"}
    with pytest.raises(EnvUnknown):  # nothing sent yet
        _run(daemon, {**base, ENV_DIGEST: ENV_LATEST}, session="tt-env-l1")
    for value in ("older", "newer"):
        env = {"PATH": "/usr/bin:/bin", "TT_ONCE": value}
        _run(daemon, {**base, "env": env}, session="tt-env-l1")
    res = _run(daemon, {**base, ENV_DIGEST: ENV_LATEST}, session="tt-env-l1")
    assert res["stdout_tail"] == "newer\n"
    with pytest.raises(EnvUnknown):  # another session's is not its own
        _run(daemon, {**base, ENV_DIGEST: ENV_LATEST}, session="tt-env-l2")


def test_latest_forgets_an_evicted_environment() -> None:
    from tenantry.core.models import AgentProduct, Principal
    from tenantry.gateway.envs import SessionEnvs

    envs = SessionEnvs(limit=2)
    me, other = (Principal(1, "u", AgentProduct.CLAUDE_CODE, s, "h") for s in ("s1", "s2"))
    envs.remember(me, {"A": "1"})
    assert envs.expand(me, {ENV_DIGEST: ENV_LATEST})["env"] == {"A": "1"}
    envs.remember(other, {"B": "1"})
    envs.remember(other, {"B": "2"})  # the limit evicts me's only environment
    with pytest.raises(EnvUnknown):
        envs.expand(me, {ENV_DIGEST: ENV_LATEST})
    assert envs.expand(other, {ENV_DIGEST: ENV_LATEST})["env"] == {"B": "2"}


async def test_the_async_client_sends_an_environment_once(
    daemon: Daemon, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tenantry.client import wire
    from tenantry.client.aio import AsyncClient

    bodies: list[dict[str, Any]] = []
    real = wire.encode_request

    def spy(method: str, path: str, body: bytes = b"", headers: Any = None) -> bytes:
        if path.endswith("/commands.run"):
            bodies.append(json.loads(body))
        return real(method, path, body, headers)

    monkeypatch.setattr(wire, "encode_request", spy)
    client = AsyncClient(daemon.settings, claims={"agent": "human", "session": "tt-env-once"})
    env = {"PATH": "/usr/bin:/bin", "TT_ONCE": "v"}
    params = {"argv": ["sh", "-c", 'echo "$TT_ONCE"'], "cwd": str(tmp_path), "env": env}
    try:
        for _ in range(3):
            out = [c async for c in client.stream("commands.run", params)]
            assert out[-1]["result"]["stdout_tail"] == "v\n"
    finally:
        await client.aclose()
    assert ["env" in b for b in bodies] == [True, False, False]
    assert all(b.get(ENV_DIGEST) == env_digest(env) for b in bodies[1:])


@pytest.mark.own_daemon
async def test_after_a_daemon_restart_the_environment_is_sent_again(
    daemon: Daemon, tmp_path: Path
) -> None:
    from tenantry.client.aio import AsyncClient

    client = AsyncClient(daemon.settings, claims={"agent": "human", "session": "tt-env-rs"})
    env = {"PATH": "/usr/bin:/bin", "TT_ONCE": "again"}
    params = {"argv": ["sh", "-c", 'echo "$TT_ONCE"'], "cwd": str(tmp_path), "env": env}
    try:
        for _ in range(2):
            [c async for c in client.stream("commands.run", params)]
        daemon.stop()
        daemon.start()
        out = [c async for c in client.stream("commands.run", params)]
    finally:
        await client.aclose()
    assert out[-1]["result"]["stdout_tail"] == "again\n"


def test_the_held_digest_is_computed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """An MCP shim sends its environment by digest on every call: hashed once, not per call."""
    from tenantry.client import wire
    from tenantry.client.sync import HeldEnv

    calls: list[int] = []

    def counting(env: dict[str, object]) -> str:
        calls.append(1)
        return env_digest(env)

    monkeypatch.setattr(wire, "env_digest", counting)
    held = HeldEnv()
    env = {"PATH": "/usr/bin", "TT_ONCE": "x"}
    sent, whole = held.params({"argv": ["true"], "env": dict(env)})
    assert sent["env"] == env and whole == env and not calls  # a first send hashes nothing
    held.accepted(whole)
    digests = [held.params({"argv": ["true"], "env": dict(env)})[0][ENV_DIGEST] for _ in range(5)]
    assert digests == [env_digest(env)] * 5 and len(calls) == 1
    changed = {**env, "TT_ONCE": "y"}
    sent, whole = held.params({"argv": ["true"], "env": changed})
    assert sent["env"] == changed and whole == changed
    held.accepted(whole)
    assert held.params({"argv": ["true"], "env": changed})[0][ENV_DIGEST] == env_digest(changed)
