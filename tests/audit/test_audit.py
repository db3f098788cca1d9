"""The audit chain: every edit, deletion, reordering and truncation is detected."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import tenantry.safety.audit as audit_pkg
from tenantry.core.events import Bus, Event, EventType
from tenantry.core.models import AgentProduct, Principal
from tenantry.core.settings import load
from tenantry.safety.audit.chain import HEAD_NAME, LOG_NAME, ChainWriter, load_key, verify
from tenantry.safety.audit.cli import parse_since
from tenantry.safety.audit.component import AuditLog
from tenantry.service.runtime import Runtime


def write_log(d: Path, n: int = 5, key: bytes | None = b"k" * 32) -> None:
    w = ChainWriter(d, key)
    w.open()
    for i in range(n):
        w.append(
            {"principal": "a/codex/s", "action": "x", "decision": "allow", "n": i}, fsync=False
        )
    w.close()


def lines(d: Path) -> list[str]:
    return (d / LOG_NAME).read_text().splitlines()


def put(d: Path, ls: list[str]) -> None:
    (d / LOG_NAME).write_text("".join(x + "\n" for x in ls))


KEY = b"k" * 32


def kinds(d: Path, key: bytes | None = KEY) -> set[str]:
    return {p["kind"] for p in verify(d, key).problems}


def test_intact_log_verifies(tmp_path: Path) -> None:
    write_log(tmp_path)
    r = verify(tmp_path, KEY)
    assert r.ok and r.records == 5 and r.head_seq == 5 and r.alg == "hmac-sha256"


def test_edit_is_detected(tmp_path: Path) -> None:
    write_log(tmp_path)
    ls = lines(tmp_path)
    rec = json.loads(ls[2])
    rec["decision"] = "deny"
    ls[2] = json.dumps(rec)
    put(tmp_path, ls)
    assert "hash" in kinds(tmp_path)


def test_edit_with_recomputed_plain_hash_is_detected_by_hmac(tmp_path: Path) -> None:
    import hashlib

    from tenantry.safety.audit.chain import canonical

    write_log(tmp_path)
    ls = lines(tmp_path)
    rec = json.loads(ls[-1])
    rec["decision"] = "deny"
    rec["hash"] = hashlib.sha256(
        canonical({k: v for k, v in rec.items() if k != "hash"})
    ).hexdigest()
    ls[-1] = json.dumps(rec)
    put(tmp_path, ls)
    assert not verify(tmp_path, KEY).ok


def test_deletion_is_detected(tmp_path: Path) -> None:
    write_log(tmp_path)
    ls = lines(tmp_path)
    del ls[1]
    put(tmp_path, ls)
    assert {"sequence", "chain"} <= kinds(tmp_path)


def test_reordering_is_detected(tmp_path: Path) -> None:
    write_log(tmp_path)
    ls = lines(tmp_path)
    ls[1], ls[2] = ls[2], ls[1]
    put(tmp_path, ls)
    assert {"sequence", "chain"} <= kinds(tmp_path)


def test_truncation_is_detected_by_the_anchor(tmp_path: Path) -> None:
    write_log(tmp_path)
    put(tmp_path, lines(tmp_path)[:-2])
    assert kinds(tmp_path) == {"truncated"}


def test_truncation_to_empty_and_missing_anchor(tmp_path: Path) -> None:
    write_log(tmp_path)
    put(tmp_path, [])
    assert "truncated" in kinds(tmp_path)
    write_log(tmp_path / "b")
    (tmp_path / "b" / HEAD_NAME).unlink()
    assert kinds(tmp_path / "b") == {"anchor"}


def test_garbage_line_and_wrong_key(tmp_path: Path) -> None:
    write_log(tmp_path)
    assert "hash" in kinds(tmp_path, b"x" * 32)
    with (tmp_path / LOG_NAME).open("a") as fh:
        fh.write("not json\n")
    assert "unparsable" in kinds(tmp_path)


def test_plain_chain(tmp_path: Path) -> None:
    write_log(tmp_path, key=None)
    assert verify(tmp_path, None).ok
    assert verify(tmp_path, None).alg == "sha256"


def test_writer_resumes_from_anchor_so_truncation_stays_visible(tmp_path: Path) -> None:
    write_log(tmp_path)
    put(tmp_path, lines(tmp_path)[:-1])
    write_log(tmp_path, n=2)  # a restart appends after the truncation
    assert not verify(tmp_path, KEY).ok
    clean = tmp_path / "clean"
    write_log(clean, 3)
    write_log(clean, 2)  # a clean restart continues the chain
    r = verify(clean, KEY)
    assert r.ok and r.records == 5


def test_key_is_created_private(tmp_path: Path) -> None:
    key = load_key(tmp_path / "a" / "audit.key", create=True)
    assert key is not None and len(key) == 32
    assert (tmp_path / "a" / "audit.key").stat().st_mode & 0o777 == 0o600
    assert load_key(tmp_path / "a" / "audit.key", create=False) == key
    assert load_key(tmp_path / "missing", create=False) is None


async def test_component_records_bus_events_and_explicit_decisions(tmp_path: Path) -> None:
    settings = load(env={}, overrides={"state_dir": str(tmp_path)})
    bus = Bus()
    rt = Runtime(settings, journal=None, bus=bus, backend=None)  # type: ignore[arg-type]
    log = AuditLog(rt, fsync=False)
    await log.start()
    p = Principal(uid=1, user="alice", agent=AgentProduct.CODEX, session="s1")
    await bus.publish(Event(EventType.COMMAND_STARTED, p.key, "c1", data={"argv": ["ls"]}))
    rec = await log.record(
        p, "policy.decision", {"cmd": "scancel -u bob"}, "deny", "forbid-scancel"
    )
    assert await log.gate(p, "jobs.list", "query_jobs", {"all": True}) == []
    await log.aclose()
    assert rec["seq"] == 2 and rec["rule"] == "forbid-scancel"
    assert "-u bob" not in (tmp_path / "audit" / LOG_NAME).read_text()  # only a digest
    r = verify(tmp_path / "audit", load_key(tmp_path / "audit" / "audit.key", create=False))
    assert r.ok and r.records == 3
    last = json.loads((tmp_path / "audit" / LOG_NAME).read_text().splitlines()[-1])
    assert (last["action"], last["decision"], last["rule"]) == (
        "op:jobs.list",
        "allow",
        "query_jobs",
    )


def test_parse_since() -> None:
    assert parse_since("2h", now=10_000.0) == 10_000.0 - 7200
    assert parse_since("123.5") == 123.5
    assert parse_since("1970-01-01T00:01:00+00:00") == 60.0


def cli(*args: str, state: Path) -> subprocess.CompletedProcess[str]:
    env = {"TENANTRY_STATE_DIR": str(state), "PATH": "/usr/bin:/bin"}
    import os

    env["PYTHONPATH"] = os.environ.get("PYTHONPATH", "")
    return subprocess.run(
        [sys.executable, "-m", "tenantry", "audit", *args],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def test_cli_verify_and_show(tmp_path: Path) -> None:
    d = tmp_path / "audit"
    key = load_key(d / "audit.key", create=True)
    write_log(d, 4, key=key)
    ok = cli("verify", "--json", state=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["records"] == 4
    shown = cli("show", "--json", "--since", "1h", state=tmp_path)
    assert [r["seq"] for r in json.loads(shown.stdout)] == [1, 2, 3, 4]
    put(d, lines(d)[:-1])
    bad = cli("verify", state=tmp_path)
    assert bad.returncode == 1
    assert "TAMPERED" in bad.stdout and "truncated" in bad.stdout


def test_public_api() -> None:
    for name in audit_pkg.__all__:
        assert hasattr(audit_pkg, name)


@pytest.mark.parametrize("n", [1, 50])
def test_sizes(tmp_path: Path, n: int) -> None:
    write_log(tmp_path, n)
    assert verify(tmp_path, KEY).records == n


def test_records_past_the_anchor_are_in_flight_not_tampering(tmp_path: Path) -> None:
    write_log(tmp_path, 3)
    head = (tmp_path / HEAD_NAME).read_text()
    write_log(tmp_path, 2)
    (tmp_path / HEAD_NAME).write_text(head)  # as if the daemon died before the anchor update
    r = verify(tmp_path, KEY)
    assert r.ok and r.records == 5 and r.warnings
    write_log(tmp_path, 1)  # restart: continues after the unanchored records
    r = verify(tmp_path, KEY)
    assert r.ok and r.records == 6 and not r.warnings
