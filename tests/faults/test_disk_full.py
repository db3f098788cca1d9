"""The store on a full file system (a small tmpfs): clear errors, no corruption, recovery."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tenantry.core.errors import StoreError
from tenantry.core.events import Event, EventType
from tenantry.core.models import Job, JobSpec, Principal
from tenantry.store.journal import Journal

from ..conftest import new_job

ME = Principal(1000, "alice")


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root (CI runs as root)")
    mnt = tmp_path / "disk"
    mnt.mkdir()
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)],
        capture_output=True,
        text=True,
    )
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _job(n: int) -> tuple[Job, JobSpec]:
    job = new_job(ME, name=f"j{n}")
    spec = JobSpec(script="/w/j.sh", script_text="#!/bin/sh\n" + "x" * 2000, cwd="/w")
    return job, spec


def _fill(mnt: Path) -> Path:
    filler = mnt / "filler"
    with filler.open("wb") as f, contextlib.suppress(OSError):
        while True:
            f.write(b"\0" * 65536)
            f.flush()
    return filler


async def test_store_on_a_full_disk(small_disk: Path) -> None:
    journal = Journal(small_disk / "tenantry.db")
    await journal.start()
    try:
        kept, spec = _job(0)
        kept = await journal.journal_job(kept, spec, "h0")
        filler = _fill(small_disk)
        # writes are refused with a clear error, never a crash or a half write
        with pytest.raises(StoreError) as info:
            for n in range(1, 2000):
                job, spec = _job(n)
                await journal.journal_job(job, spec, f"h{n}")
        assert "full" in info.value.message and "free space" in (info.value.hint or "")
        for n in range(50):
            await journal.add_event(Event(EventType.STATUS_QUERY, ME.key, f"e{n}", "ok"))
        with pytest.raises(StoreError):
            await journal.flush()
        # reads still work and see every committed row
        assert (await journal.get_job(kept.id)) is not None
        before = len(await journal.list_jobs(limit=10_000))
        filler.unlink()
        # the disk has room again: the store works without a restart
        job, spec = _job(9999)
        job = await journal.journal_job(job, spec, "h9999")
        assert len(await journal.list_jobs(limit=10_000)) == before + 1
        events = await journal.events(types=["status.query"])
        assert len(events) == 50, "telemetry held back while the disk was full was lost"
        row = await journal.db.fetchone("PRAGMA integrity_check")
        assert row is not None and row[0] == "ok"
    finally:
        await journal.aclose()
