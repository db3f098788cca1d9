"""The FUSE stand-in for a parallel file system counts metadata operations per caller uid.

Two callers (root and ``nobody``) list and read the same tree on a real
``bench/fusedelay.py`` mount with no kernel caching; each uid's count is what
its own system calls cost, and together they are the mount's total.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import metadata

from ..conftest import need_fuse

NOBODY = 65534


def test_operations_are_counted_under_the_uid_that_made_them() -> None:
    need_fuse()
    work = Path(tempfile.mkdtemp(prefix="ttfuse-test-", dir="/var/tmp"))
    try:
        os.chmod(work, 0o755)
        src, mnt = work / "src", work / "mnt"
        (src / "d").mkdir(parents=True)
        for i in range(5):
            (src / "d" / f"f{i}.txt").write_text(f"{i}\n")
        with metadata.Mount(src, mnt, 0.0, 0.0, ("allow_other",), start="spawn") as m:
            base_total, _ = metadata.Mount.meta(dict.fromkeys(m.snapshot(), 0), m.snapshot())
            base_uids = m.by_uid()
            subprocess.run(["ls", "-la", str(mnt / "d")], check=True, capture_output=True)
            root_ops = m.by_uid().get(0, 0) - base_uids.get(0, 0)
            subprocess.run(
                ["cat", str(mnt / "d" / "f1.txt"), str(mnt / "d" / "f2.txt")],
                check=True,
                capture_output=True,
                user=NOBODY,
                group=NOBODY,
            )
            uids = m.by_uid()
            total, _ = metadata.Mount.meta(dict.fromkeys(m.snapshot(), 0), m.snapshot())
        nobody_ops = uids.get(NOBODY, 0) - base_uids.get(NOBODY, 0)
        # ls -la: the directory's lookup, open and listing, a getattr of each entry
        assert root_ops >= 5
        # cat of two files: each one's lookups and open, nothing of the listing
        assert 4 <= nobody_ops < root_ops
        assert uids.get(0, 0) - base_uids.get(0, 0) == root_ops
        assert sum(uids.values()) - sum(base_uids.values()) == total - base_total
    finally:
        subprocess.run(["fusermount3", "-u", "-q", str(work / "mnt")], check=False)
        shutil.rmtree(work, ignore_errors=True)
