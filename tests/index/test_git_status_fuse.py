"""The offloaded ``git status`` on a FUSE mount that counts every metadata operation.

The workspace is a repository behind ``bench/fusedelay.py`` (no delay, no
kernel caching: every lookup, getattr, open and directory listing reaches the
counter); the index follows it through the server's own tree
(``index_watch_backing``), as it follows a parallel file system through its
changelog. Changes are made there, as a batch job on another host makes them.
After one edit, git may spend on the mount only what the edited path costs:
its repository is read from the private copy in the daemon's state. After
every change, of the work tree or of the repository (a commit, a branch
switch, ``git add``, a rebase stopped by a conflict), the answer is exactly
what ``git status`` prints.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from tenantry.core.models import Principal
from tenantry.index.component import IndexService
from tenantry.service.ops import OpContext

from ..conftest import need_fuse
from .conftest import runtime, wait_until
from .test_git_status import GIT_ENV, edit, git, make_repo, served

BENCH = str(Path(__file__).resolve().parents[2] / "bench")
if BENCH not in sys.path:
    sys.path.append(BENCH)

import metadata  # noqa: E402  (bench/, put on the path above)

# One edited file, with the kernel caching nothing (every system call looks each path
# component up): git lstats the file twice and re-lists and re-reads the ignore rules of
# each directory on its path (the fsmonitor protocol names paths, and git invalidates its
# untracked cache along each), about 40 operations; the hook and the daemon's own check
# of .git 6 more. Reading the repository on the mount cost 500 more. A file written in
# the same second as the index git last wrote is racily clean (git compares seconds) and
# costs one more lstat per run, 5 operations on the mount: the tests make the work tree
# older than the index first, or the count depends on the clock.
AFTER_ONE_EDIT = 64


def backdate(src: Path) -> None:
    """Every file of the work tree written 2 s ago: none is as new as the next index."""
    then = time.time() - 2
    for path in [src, *src.rglob("*")]:
        if ".git" not in path.relative_to(src).parts:
            os.utime(path, (then, then), follow_symlinks=False)


def _need_fuse() -> None:
    need_fuse("needs git" if shutil.which("git") is None else "")


@pytest.fixture
def mount(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[metadata.Mount]:
    _need_fuse()
    # the daemon's git reads the configuration the test's git reads
    monkeypatch.setenv("HOME", str(tmp_path))
    for key, value in GIT_ENV.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("FUSEDELAY_TRACE", str(tmp_path / "trace"))  # who spent each operation
    src, mnt = tmp_path / "src", tmp_path / "mnt"
    make_repo(src)
    backdate(src)
    with metadata.Mount(src, mnt, 0.0, 0.0, start="spawn") as m:
        yield m


@pytest.fixture
async def svc(tmp_path: Path, mount: metadata.Mount) -> AsyncIterator[IndexService]:
    backing = f"{mount.mnt}={mount.src}"
    service = IndexService(runtime(tmp_path, index_sweep_s=0, index_watch_backing=backing))
    service.runtime.components["index"] = service
    await service.start()
    try:
        await service.add(str(mount.mnt), wait=True)
        assert service.git_offload(str(mount.mnt))[0] is not None
        yield service
    finally:
        await service.aclose()


async def quiet(service: IndexService) -> None:
    """The index has followed every change (its re-checks included)."""

    async def idle() -> bool:
        await service.settle()
        return not service._file_rechecks and not service._tasks

    assert await wait_until(idle)


async def counted(service: IndexService, mount: metadata.Mount, *args: str) -> tuple[str, int]:
    """The offloaded status and the metadata operations it cost on the mount."""
    ctx = OpContext(Principal(uid=os.getuid(), user="t"), service.runtime)
    await quiet(service)
    before = mount.snapshot()
    ok, out = await served(ctx, mount.mnt, *args)
    ops, _ = metadata.Mount.meta(before, mount.snapshot())
    assert ok
    return out, ops


def real(mount: metadata.Mount, *args: str) -> str:
    return git(mount.src, "--no-optional-locks", "status", *(args or ("--porcelain",)))


def rebase_stopped(src: Path) -> None:
    """A rebase of ``topic`` onto ``master`` stopped by a conflict in src/m0.py."""
    git(src, "checkout", "-q", "-b", "topic")
    (src / "src" / "m0.py").write_text("topic\n")
    git(src, "commit", "-qam", "topic")
    git(src, "checkout", "-q", "master")
    (src / "src" / "m0.py").write_text("master\n")
    git(src, "commit", "-qam", "master")
    git(src, "checkout", "-q", "topic")
    env = {**os.environ, **GIT_ENV, "HOME": str(src.parent)}
    done = subprocess.run(
        ["git", "-C", str(src), "rebase", "master"], env=env, capture_output=True, check=False
    )
    assert done.returncode != 0 and (src / ".git" / "rebase-merge").is_dir()


def _commit_edit(src: Path, rel: str) -> None:
    edit(src / rel, "x\n")
    git(src, "commit", "-qam", rel)


STEPS: list[tuple[str, Any]] = [
    ("a new untracked file", lambda s: (s / "src" / "new.py").write_text("n = 1\n")),
    ("git add (the repository's index)", lambda s: git(s, "add", "src/new.py")),
    ("a commit by plain git (HEAD's ref)", lambda s: git(s, "commit", "-qam", "c")),
    ("a branch switch", lambda s: git(s, "checkout", "-q", "-b", "side")),
    ("a commit on the branch", lambda s: _commit_edit(s, "docs/guide.md")),
    ("back to master", lambda s: git(s, "checkout", "-q", "master")),
    ("a rebase stopped by a conflict", rebase_stopped),
    ("an edit during the rebase", lambda s: edit(s / "src" / "m9.py", "r\n")),
    ("the rebase aborted", lambda s: git(s, "rebase", "--abort")),
]


async def test_one_edit_costs_a_handful_of_operations(
    svc: IndexService, mount: metadata.Mount, tmp_path: Path
) -> None:
    src = mount.src
    out, _ = await counted(svc, mount)
    assert out == real(mount) == ""
    edit(src / "src" / "m1.py", "y = 2\n")
    start = time.time()
    out, ops = await counted(svc, mount)
    end = time.time()
    assert out == real(mount) == " M src/m1.py\n"
    assert ops <= AFTER_ONE_EDIT, ops
    repo = svc.git.repo(svc.resolve(str(mount.mnt)).ws)
    assert repo.gitdir and not repo.why  # git read its repository from the private copy
    mount.__exit__(None, None, None)  # the server has written its whole trace
    on_repository = [
        line
        for line in (tmp_path / "trace").read_text().splitlines()
        if _git_in_repository(line.split("\t"), start, end)
    ]
    assert on_repository == []


def _git_in_repository(f: list[str], start: float, end: float) -> bool:
    """A trace line (time, op, pid, caller, path): git, between start and end, in .git."""
    path = f[4] if len(f) > 4 else ""
    in_git = "/.git/" in path or path.endswith("/.git")
    return start <= float(f[0]) <= end and f[3].startswith("git ") and in_git


async def test_identical_to_git_after_repository_changes(
    svc: IndexService, mount: metadata.Mount
) -> None:
    src = mount.src
    edit(src / "src" / "m1.py", "y = 2\n")
    for what, change in STEPS:
        change(src)
        for args in (("--porcelain",), ("--long",)):
            out, _ = await counted(svc, mount, *args)
            assert out == real(mount, *args), (what, args)
    # the steps' files are as new as the private index: one run in a later second
    # checks them and writes the index newer than all of them (git's racy-git rule)
    time.sleep(1.05 - time.time() % 1.0)
    out, _ = await counted(svc, mount)
    assert out == real(mount)
    edit(src / "src" / "m2.py", "z = 1\n")  # the steady state again: one edit, a handful
    out, ops = await counted(svc, mount)
    assert out == real(mount)
    assert ops <= AFTER_ONE_EDIT, ops
