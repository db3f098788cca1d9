"""Tampering without the key is detected; a full disk is told apart from tampering."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tenantry.safety.audit.chain import HEAD_NAME, LOG_NAME, ChainWriter, load_key, verify

KEY = b"k" * 32


def _log(tmp_path: Path, n: int = 6) -> Path:
    d = tmp_path / "audit"
    w = ChainWriter(d, KEY)
    w.open()
    for i in range(n):
        w.append({"principal": "u/codex/s", "action": "op:x", "subject": str(i)}, fsync=False)
    w.close()
    return d


def _kinds(d: Path) -> set[str]:
    return {p["kind"] for p in verify(d, KEY).problems}


def test_intact_log_verifies(tmp_path: Path) -> None:
    assert verify(_log(tmp_path), KEY).ok


def test_tail_cut_and_anchor_rewritten_without_key(tmp_path: Path) -> None:
    d = _log(tmp_path)
    lines = (d / LOG_NAME).read_text().splitlines(keepends=True)
    (d / LOG_NAME).write_text("".join(lines[:3]))
    last = json.loads(lines[2])
    head = json.loads((d / HEAD_NAME).read_text())
    head.update(seq=last["seq"], hash=last["hash"])  # no key: the old MAC stays
    (d / HEAD_NAME).write_text(json.dumps(head))
    assert "anchor" in _kinds(d)
    head.pop("mac")
    (d / HEAD_NAME).write_text(json.dumps(head))
    assert "anchor" in _kinds(d)


def test_log_and_anchor_deleted(tmp_path: Path) -> None:
    d = _log(tmp_path)
    (d / LOG_NAME).unlink()
    (d / HEAD_NAME).unlink()
    assert "missing" in _kinds(d)


def test_reordered_records(tmp_path: Path) -> None:
    d = _log(tmp_path)
    lines = (d / LOG_NAME).read_text().splitlines(keepends=True)
    lines[1], lines[2] = lines[2], lines[1]
    (d / LOG_NAME).write_text("".join(lines))
    assert {"sequence", "chain"} <= _kinds(d)


def test_external_anchor_catches_a_rewritten_log(tmp_path: Path) -> None:
    d = _log(tmp_path)
    rec = json.loads((d / LOG_NAME).read_text().splitlines()[3])
    assert verify(d, KEY, external=(rec["seq"], rec["hash"])).ok
    assert "external" in {
        p["kind"] for p in verify(d, KEY, external=(rec["seq"], "0" * 64)).problems
    }


def test_key_file_is_private(tmp_path: Path) -> None:
    load_key(tmp_path / "k" / "audit.key", create=True)
    assert (tmp_path / "k" / "audit.key").stat().st_mode & 0o077 == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root (CI runs as root)")
def test_full_disk_refuses_then_recovers_and_verify_says_write_failure(tmp_path: Path) -> None:
    if shutil.which("mount") is None:
        pytest.skip("no mount(8)")
    mnt = tmp_path / "small"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], check=True)
    try:
        d = mnt / "audit"
        w = ChainWriter(d, KEY)
        w.open()
        w.append({"action": "op:first"})
        filler = mnt / "filler"
        fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)  # fill the disk
        try:
            while os.write(fd, b"x" * 4096):
                pass
        except OSError:
            pass
        finally:
            os.close(fd)
        with pytest.raises(OSError):
            for _ in range(50):
                w.append({"action": "op:refused", "subject": "y" * 2000})
        assert verify(d, KEY).ok  # the torn write was rolled back
        filler.unlink()
        w.append({"action": "op:after"})
        w.close()
        report = verify(d, KEY)
        assert report.ok, report.problems
        assert any(x.startswith("write failure at seq ") for x in report.warnings), report.warnings
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


async def test_gate_refuses_an_action_that_cannot_be_recorded_then_recovers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tenantry.core.errors import AuditUnavailable
    from tenantry.core.events import Bus
    from tenantry.core.models import AgentProduct, Principal
    from tenantry.core.settings import load
    from tenantry.safety.audit.component import AuditLog
    from tenantry.service.runtime import Runtime

    settings = load(env={}, overrides={"state_dir": str(tmp_path)})
    rt = Runtime(settings, journal=None, bus=Bus(), backend=None)  # type: ignore[arg-type]
    log = AuditLog(rt, fsync=False)
    await log.start()
    p = Principal(uid=1, user="alice", agent=AgentProduct.CODEX, session="s1")
    real_write = os.write

    def full(fd: int, data: bytes) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(AuditUnavailable, match="cannot be written"):
        await log.gate(p, "jobs.submit", "submit_job", {})
    monkeypatch.setattr(os, "write", real_write)
    assert await log.gate(p, "jobs.submit", "submit_job", {}) == []
    await log.aclose()
    key = load_key(tmp_path / "audit" / "audit.key", create=False)
    report = verify(tmp_path / "audit", key)
    assert report.ok and any("write failure at seq" in w for w in report.warnings)
