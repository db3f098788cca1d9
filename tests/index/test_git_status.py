"""``index.git_status`` against real git on a real repository, watched by real inotify.

Every step changes the work tree (or the repository) and asks at once: the
answer must equal what ``git status`` itself prints, so an answer that lags
the change feed fails here.
"""

from __future__ import annotations

import base64
import os
import shutil
import struct
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tenantry.index import gitdir
from tenantry.index import ops as index_ops
from tenantry.index.changes import WatchdogSource, fs_type, parse_backing
from tenantry.index.component import IndexService
from tenantry.index.gitstatus import Journal, reply_paths
from tenantry.index.inotify import IN_Q_OVERFLOW, parse
from tenantry.service.ops import OpContext

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is needed")

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.org",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.org",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, **GIT_ENV, "HOME": str(repo.parent)}
    out = subprocess.run(
        ["git", "-C", str(repo), *args], env=env, capture_output=True, text=True, check=True
    )
    return out.stdout


def make_repo(root: Path) -> None:
    root.mkdir()
    for d in ("src", "src/pkg", "docs", "build"):
        (root / d).mkdir()
    for i in range(12):
        (root / "src" / f"m{i}.py").write_text(f"x = {i}\n")
    (root / "src" / "pkg" / "a.py").write_text("a = 1\n")
    (root / "src" / "pkg" / "b.py").write_text("b = 1\n")
    (root / "docs" / "guide.md").write_text("# guide\n")
    (root / ".gitignore").write_text("build/\n*.log\n")
    (root / "build" / "out.o").write_text("obj\n")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "init")


@pytest.fixture
async def repo_root(service: IndexService, tmp_path: Path) -> Path:
    """A committed repository, indexed and offloaded (its status primed: clean)."""
    root = tmp_path / "repo"
    make_repo(root)
    await service.add(str(root), wait=True)
    if not service.git_offload(str(root))[0]:
        pytest.skip(f"inotify is not complete on {fs_type(str(root))!r}")
    return root


async def served(ctx: OpContext, root: Path, *args: str) -> tuple[bool, str]:
    res: dict[str, Any] = await index_ops.git_status(
        ctx, {"path": str(root), "args": list(args) or ["--porcelain"]}
    )
    if not res["offloaded"]:
        return False, res["reason"]
    assert res["rc"] == 0, base64.b64decode(res["stderr_b64"])
    return True, base64.b64decode(res["stdout_b64"]).decode()


def real(root: Path, *args: str) -> str:
    return git(root, "--no-optional-locks", "status", *(args or ("--porcelain",)))


def edit(p: Path, text: str) -> None:
    with p.open("a") as f:
        f.write(text)


STEPS: list[tuple[str, Any]] = [
    ("modify a tracked file", lambda r: edit(r / "src" / "m1.py", "y = 2\n")),
    ("add an untracked file", lambda r: (r / "src" / "new.py").write_text("n = 1\n")),
    ("an untracked file in a new directory", lambda r: _new_dir(r)),
    ("an ignored file", lambda r: (r / "src" / "trace.log").write_text("log\n")),
    ("a file in an ignored directory", lambda r: (r / "build" / "more.o").write_text("o\n")),
    ("stage a change (the repository's index moves)", lambda r: git(r, "add", "src/new.py")),
    ("delete a tracked file", lambda r: (r / "src" / "m2.py").unlink()),
    ("rename a tracked file", lambda r: (r / "src" / "m3.py").rename(r / "src" / "m3b.py")),
    ("rename a directory", lambda r: (r / "src" / "pkg").rename(r / "src" / "pkg2")),
    ("git mv", lambda r: git(r, "mv", "docs/guide.md", "docs/guide2.md")),
    ("un-ignore by editing .gitignore", lambda r: (r / ".gitignore").write_text("build/\n")),
    ("ignore a directory by a nested .gitignore", lambda r: _nested_ignore(r)),
    ("commit everything", lambda r: (git(r, "add", "-A"), git(r, "commit", "-q", "-m", "c"))),
    ("modify after the commit", lambda r: edit(r / "src" / "m4.py", "z = 3\n")),
    ("rewrite a file, same size", lambda r: (r / "src" / "m5.py").write_text("x = 9\n")),
    ("make a file executable", lambda r: (r / "src" / "m6.py").chmod(0o755)),
    ("replace a file by a directory", lambda r: _file_to_dir(r)),
    ("revert a modification", lambda r: git(r, "checkout", "--", "src/m4.py")),
    ("refs packed", lambda r: git(r, "pack-refs", "--all")),
    ("a commit after that", lambda r: git(r, "commit", "-qam", "p")),
    ("objects packed, loose ones pruned", lambda r: git(r, "gc", "-q", "--prune=now")),
    ("a branch switch", lambda r: git(r, "checkout", "-q", "-b", "side")),
    ("a ref moved alone", lambda r: git(r, "reset", "-q", "--soft", "HEAD~1")),
    ("a detached HEAD", lambda r: git(r, "checkout", "-q", "--detach")),
    ("objects repacked alone", lambda r: (git(r, "repack", "-adqn"), git(r, "prune-packed"))),
    ("a staged edit (git reads HEAD's trees)", lambda r: _staged_edit(r, "src/m8.py")),
]


def _staged_edit(r: Path, rel: str) -> None:
    edit(r / rel, "s = 1\n")
    git(r, "add", rel)


def _new_dir(r: Path) -> None:
    (r / "tools").mkdir()
    (r / "tools" / "t.sh").write_text("echo\n")


def _nested_ignore(r: Path) -> None:
    (r / "tools" / ".gitignore").write_text("*.sh\n")


def _file_to_dir(r: Path) -> None:
    (r / "src" / "m7.py").unlink()
    (r / "src" / "m7.py").mkdir()
    (r / "src" / "m7.py" / "inner.py").write_text("i = 1\n")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The daemon's git reads the configuration the test's git reads (before it starts)."""
    monkeypatch.setenv("HOME", str(tmp_path))
    for key, value in GIT_ENV.items():
        monkeypatch.setenv(key, value)
    return tmp_path


async def test_identical_to_git_after_every_kind_of_change(
    home: Path, service: IndexService, ctx: OpContext, repo_root: Path
) -> None:
    root = repo_root
    repo = service.git.repo(service.resolve(str(root)).ws)
    assert repo.runs == 2 and repo.trivial == 1  # primed by the crawl (two runs)
    ok, first = await served(ctx, root)
    assert ok and first == real(root) and repo.trivial == 1
    for what, change in STEPS:
        change(root)
        ok, got = await served(ctx, root)  # at once: no wait for the feed
        assert ok
        assert got == real(root), what
        ok, short = await served(ctx, root, "-sb", "--untracked-files=all")
        assert short == real(root, "-sb", "--untracked-files=all"), what
        ok, long = await served(ctx, root, "--long")
        assert long == real(root, "--long"), what
        assert repo.gitdir and not repo.why  # from the private copy of .git
    # git really asked the feed: only the crawl's priming run (and the runs after
    # the repository's own index changed) got the "everything changed" answer
    assert repo.runs == 3 + 3 * len(STEPS)
    assert repo.trivial <= 12, repo.trivial
    assert not (root / ".git" / "index.lock").exists()


def _restart(service: IndexService) -> None:
    service.git.boot = "restarted"  # as if another daemon had written the private index


def _overflow(service: IndexService) -> None:
    # the kernel's record of dropped events (wd -1), as the loop's reader reads it
    tree = service.source._tree  # type: ignore[attr-defined]
    for wd, mask, cookie, name in parse(struct.pack("iIII", -1, IN_Q_OVERFLOW, 0, 0)):
        tree._event(wd, mask, cookie, name)


@pytest.mark.parametrize("lose", [_restart, _overflow], ids=["restarted", "overflow"])
async def test_an_unanswerable_token_gets_the_trivial_answer(
    service: IndexService, ctx: OpContext, repo_root: Path, lose: Any
) -> None:
    root = repo_root
    assert (await served(ctx, root))[1] == ""
    repo = service.git.repo(service.resolve(str(root)).ws)
    lose(service)
    edit(root / "src" / "m1.py", "q = 1\n")
    trivial = repo.trivial
    assert (await served(ctx, root))[1] == real(root) == " M src/m1.py\n"
    assert repo.trivial == trivial + 1


async def test_not_offloaded_where_the_feed_is_incomplete(
    manual_service: IndexService, tmp_path: Path
) -> None:
    root = tmp_path / "repo"
    make_repo(root)
    await manual_service.add(str(root), wait=True)
    ctx = OpContext(SimpleNamespace(key="t"), manual_service.runtime)  # type: ignore[arg-type]
    ok, why = await served(ctx, root)
    assert not ok and "every change" in why
    ok, why = await served(ctx, root / "src")
    assert not ok and "root" in why


def test_the_cli_runs_real_git_when_not_offloaded(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    make_repo(root)
    edit(root / "src" / "m1.py", "y = 2\n")
    env = {
        **os.environ,
        **GIT_ENV,
        "TENANTRY_STATE_DIR": str(tmp_path / "st"),
        "TENANTRY_SOCKET": str(tmp_path / "none.sock"),
        "TENANTRY_AUTOSTART": "0",
    }
    out = subprocess.run(
        [sys.executable, "-m", "tenantry", "git", "-C", str(root), "status", "--porcelain"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout == " M src/m1.py\n"


def test_reply_paths() -> None:
    assert reply_paths(["a/b.py", ".git/index", ""]) == ["a/b.py", "a/b.py/"]
    assert reply_paths(["src/.gitignore"]) == ["src/", "src/.gitignore", "src/.gitignore/"]
    assert reply_paths([".gitignore"]) is None  # the root's rules: everything


def test_which_changes_make_the_private_copies_stale() -> None:
    assert gitdir.stale([".git/index"]) == (True, False)
    for copied in (".git/HEAD", ".git/packed-refs", ".git/refs/heads/x", ".git/rebase-merge/done"):
        assert gitdir.stale([copied]) == (False, True), copied
    for pack in (".git/objects/ab", ".git/objects/pack/pack-1.idx", ".git/objects/info/alternates"):
        assert gitdir.stale([pack]) == (False, True), pack  # the object view links these
    for live in (".git/objects/ab/cdef", ".git/logs/HEAD", ".git/HEAD.lock", "src/x.py"):
        assert gitdir.stale([live]) == (False, False), live
    assert gitdir.stale([".git"]) == (True, True)


def test_journal_forgets_and_then_knows_nothing() -> None:
    j = Journal()
    for i in range(3):
        j.record(f"f{i}")
    assert j.since(1) == ["f1", "f2"]
    j.entries = type(j.entries)(list(j.entries)[1:], maxlen=j.entries.maxlen)  # dropped f0
    assert j.since(0) is None and j.since(1) == ["f1", "f2"]


def test_backing_directory_events_are_reported_under_the_root(tmp_path: Path) -> None:
    got: list[str] = []
    whats: list[str] = []
    src = WatchdogSource(parse_backing(f"/mnt/ws={tmp_path}/export"))

    def notify(path: str, what: str = "", /) -> None:
        got.append(path)
        whats.append(what)

    src._notify = notify
    assert src.watched_path("/mnt/ws/p1") == (f"{tmp_path}/export/p1", True)
    assert src.watched_path("/home/x") == ("/home/x", False)
    event = SimpleNamespace(
        event_type="moved", src_path=f"{tmp_path}/export/p1/a", dest_path=f"{tmp_path}/export/p1/b"
    )
    src.deliver(event, (f"{tmp_path}/export/p1", "/mnt/ws/p1"))
    assert got == ["/mnt/ws/p1/a", "/mnt/ws/p1/b"] and whats == ["", ""]
    written = SimpleNamespace(event_type="closed", src_path=f"{tmp_path}/export/p1/c")
    src.deliver(written, (f"{tmp_path}/export/p1", "/mnt/ws/p1"))
    assert (got[-1], whats[-1]) == ("/mnt/ws/p1/c", "modified")  # that file alone
    with pytest.raises(Exception, match="MOUNT=BACKING"):
        parse_backing("relative=/x")


def test_fs_type_takes_the_longest_mount_point(tmp_path: Path) -> None:
    mounts = tmp_path / "mounts"
    mounts.write_text("/dev/a / ext4 rw 0 0\nfuse /mnt/ws fuse.x rw 0 0\n")
    assert fs_type("/mnt/ws/p", str(mounts)) == "fuse.x"
    assert fs_type("/home", str(mounts)) == "ext4"


async def test_a_completely_watched_root_is_swept_a_tenth_as_often(tmp_path: Path) -> None:
    from .conftest import runtime, wait_until

    root = tmp_path / "repo"
    make_repo(root)
    svc = IndexService(runtime(tmp_path, index_sweep_s=0.01))
    svc.runtime.components["index"] = svc
    await svc.start()
    try:
        await svc.add(str(root), wait=True)
        if not svc.git_offload(str(root))[0]:
            pytest.skip("inotify is not complete here")
        start = svc.counters.sweep_rounds

        async def rounds() -> bool:
            return svc.counters.sweep_rounds >= start + 30

        assert await wait_until(rounds)
        assert 2 <= svc.counters.sweeps <= 5, svc.counters.sweeps  # every round: 30
    finally:
        await svc.aclose()


async def test_the_repository_config_cannot_redirect_or_write(
    service: IndexService, ctx: OpContext, repo_root: Path
) -> None:
    root = repo_root
    git(root, "config", "core.fsmonitor", "/bin/false")  # would answer "everything"
    git(root, "config", "core.splitIndex", "true")  # would write sharedindex files
    before = sorted(p.name for p in (root / ".git").iterdir())
    index_bytes = (root / ".git" / "index").read_bytes()
    edit(root / "src" / "m1.py", "y = 2\n")
    assert (await served(ctx, root))[1] == real(root) == " M src/m1.py\n"
    assert sorted(p.name for p in (root / ".git").iterdir()) == before
    assert (root / ".git" / "index").read_bytes() == index_bytes


async def test_a_configuration_that_depends_on_the_git_directory_is_not_copied(
    home: Path, service: IndexService, ctx: OpContext, repo_root: Path
) -> None:
    """``includeIf "gitdir:..."`` reads differently from another directory: git then reads
    the repository's own, and an ``~/.gitconfig`` written after the copy is noticed."""
    root = repo_root
    repo = service.git.repo(service.resolve(str(root)).ws)
    (root / "src" / "new.py").write_text("n = 1\n")
    assert (await served(ctx, root))[1] == real(root) == "?? src/new.py\n"
    assert repo.gitdir
    hidden = home / "hide-untracked"
    hidden.write_text("[status]\n\tshowUntrackedFiles = no\n")
    (home / ".gitconfig").write_text(f'[includeIf "gitdir:{root}/.git"]\n\tpath = {hidden}\n')
    assert (await served(ctx, root))[1] == real(root) == ""
    assert not repo.gitdir and "include" in repo.why
    (home / ".gitconfig").unlink()
    edit(root / "src" / "m1.py", "y = 2\n")
    assert (await served(ctx, root))[1] == real(root) == " M src/m1.py\n?? src/new.py\n"
    assert repo.gitdir and not repo.why


async def test_a_sandboxed_session_is_not_offloaded(
    service: IndexService, ctx: OpContext, repo_root: Path
) -> None:
    """The repository (which the agent writes) names commands git runs during status, such
    as a clean filter: the daemon, outside the sandbox, must not run them for the session."""
    mark = repo_root / "filter-ran"
    git(repo_root, "config", "filter.x.clean", f"touch {mark}; cat")
    (repo_root / ".gitattributes").write_text("*.py filter=x\n")
    edit(repo_root / "src" / "m1.py", "y = 3\n")
    boxed = OpContext(replace(ctx.principal, origin="sandboxed"), ctx.runtime)
    ok, why = await served(boxed, repo_root)
    assert not ok and "sandbox" in why
    assert not mark.exists()
