"""``git status`` answered with the index's change feed (git's fsmonitor protocol 2).

A plain ``git status`` stats every tracked file and lists every directory; on a
parallel file system that is thousands of metadata operations per call. The
index already learns about every change under a workspace from its change
source, so Tenantry runs git itself with two settings that let git ask instead
of look:

- ``core.fsmonitor``: a hook git calls with the token of its last run; the
  answer is the paths the change feed reported since then, so git lstats only
  those (protocol 2, ``githooks(5)``);
- ``core.untrackedCache``: untracked-file results per directory, revalidated
  for the directories the hook names.

Git stores the token and the "unchanged" bits in its index file, which a
read-only run (``--no-optional-locks``) or a read-only mount never writes, so
Tenantry keeps a private copy of the repository's index in its state directory
(``GIT_INDEX_FILE``): the same staged entries, plus the refreshed stat data and
the two extensions. Git would still read the repository itself on every run
(``HEAD``, refs, ``packed-refs``, config, the HEAD commit and tree, the merge
and rebase state: 70-100 metadata operations on the workspace's file system),
so it gets a private copy of the git directory as well (``GIT_DIR``, with
``GIT_WORK_TREE`` the workspace; ``tenantry.index.gitdir``): copies of the
small files git reads, links to the rest, and an object store of its own that
holds HEAD's commit and root tree and finds every other object in the
repository's. Both copies are made again when the change feed reports a path
under ``.git`` that they copy (``.git/index`` for the index; ``HEAD``, refs,
the state files, a new pack... for the git directory), and the git directory
also when a configuration file outside it (``~/.gitconfig``...) changed. The
repository itself is never written, and the output is git's own. Where the
git directory cannot be moved without changing the answer (a configuration
that reads differently elsewhere, ``core.worktree``, an extension git stores
elsewhere, a linked worktree), git reads the repository's own, with
the private index.

Why an answer is never stale:

- a *barrier* before every run: a cookie file is created where the change
  source watches (``.git/`` of the workspace) and the run waits until the feed
  delivers it; a change source delivers in order, so every change made before
  the request is in the journal by then;
- the copies are checked against the journal after that barrier: every
  change to the repository made before the request is in a copy git reads,
  or git reads the original (links, the object store); a barrier that failed
  or a journal that no longer reaches back makes both copies again;
- the hook answers only the token it handed out; any other token (a run that
  did not write the private index, a restarted daemon, a journal that
  overflowed) gets the trivial answer ``/``, and git checks everything;
- a workspace whose change source is not *complete* (not watched, or on a file
  system whose changes from other hosts the source does not see) is not
  offloaded: the caller runs the real ``git status``.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import secrets
import shutil
import time
from collections import deque
from dataclasses import dataclass, field

from tenantry.index import gitdir
from tenantry.index.changes import COOKIE_PREFIX

JOURNAL_MAX = 20_000  # paths remembered per workspace; an older token gets the trivial answer
BARRIER_S = 5.0  # wait this long for the cookie; then git checks everything
OBJECTS_MAX = 10_000  # objects copied per workspace before its private store starts again

HOOK_SCRIPT = """#!/bin/sh
# git fsmonitor hook (protocol 2) written by Tenantry: answers from files its daemon
# prepared for this run; any token but the expected one gets the trivial answer "/".
[ "$1" = 2 ] || exit 1
base="$TENANTRY_GIT_REPLY"
[ -n "$base" ] || exit 1
if [ "$2" = "$(cat "$base.expect" 2>/dev/null)" ]; then
  exec cat "$base.reply"
fi
exec cat "$base.trivial"
"""


@dataclass(slots=True)
class Journal:
    """The paths (workspace-relative) the change feed reported, in order, numbered."""

    seq: int = 0
    floor: int = 0  # tokens older than this cannot be answered (events were lost)
    entries: deque[tuple[int, str]] = field(default_factory=lambda: deque(maxlen=JOURNAL_MAX))

    def record(self, rel: str) -> None:
        self.seq += 1
        self.entries.append((self.seq, rel))

    def lose(self) -> None:
        """The feed dropped events (a kernel queue overflow): no older token is answerable."""
        self.seq += 1
        self.floor = self.seq

    def since(self, seq: int) -> list[str] | None:
        """Paths reported after ``seq``; None when the journal no longer reaches back."""
        if seq < self.floor or (self.entries and self.entries[0][0] > seq + 1):
            return None
        return sorted({rel for s, rel in self.entries if s > seq})


def reply_paths(paths: list[str]) -> list[str] | None:
    """What the hook tells git for the reported paths; None means "everything" (``/``).

    Each path is named as itself and as a directory (a renamed or deleted directory
    is reported once, not per file); a changed ignore file invalidates its whole
    directory; the repository's own ``.git`` is git's business.
    """
    out: set[str] = set()
    for rel in paths:
        if not rel or rel == ".git" or rel.startswith(".git/"):
            continue
        parent, _, name = rel.rpartition("/")
        if name in (".gitignore", ".gitattributes"):
            if not parent:
                return None
            out.add(parent + "/")
        out.add(rel)
        out.add(rel + "/")
    return sorted(out)


def encode(token: str, paths: list[str] | None) -> bytes:
    body = ["/"] if paths is None else paths
    return (token + "\0" + "".join(p + "\0" for p in body)).encode("utf-8", "surrogateescape")


@dataclass(slots=True)
class Repo:
    """What Tenantry keeps per offloaded workspace."""

    ws: int
    journal: Journal = field(default_factory=Journal)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    seen: int = -1  # the journal's number up to which the private copies are the repository's
    gitdir: str = ""  # the private git directory; "" while git must read the repository's
    why: str = ""  # why it must
    config_files: tuple[str, ...] = ()  # configuration outside the repository, and its key
    config_key: tuple[tuple[int, int, int], ...] = ()
    stored: int = 0  # objects in its private store
    token: str = ""  # the token the private index holds, if the last run wrote it
    runs: int = 0
    trivial: int = 0


class GitStatus:
    """The journals, barriers and git runs of the workspaces of one index."""

    def __init__(self, state_dir: str) -> None:
        self.dir = os.path.join(state_dir, "git")
        self.boot = secrets.token_hex(4)  # tokens of an earlier daemon are unknown
        self.repos: dict[int, Repo] = {}
        self._cookies: dict[str, asyncio.Future[None]] = {}
        self._names = itertools.count(1)
        self._copies = itertools.count(1)
        self._swept = False  # the private copies of an earlier daemon were removed
        self.hook = os.path.join(self.dir, "fsmonitor-hook")

    def repo(self, ws: int) -> Repo:
        r = self.repos.get(ws)
        if r is None:
            r = self.repos[ws] = Repo(ws)
        return r

    def forget(self, ws: int) -> None:
        r = self.repos.pop(ws, None)
        if r is not None:  # its copies (small: no thread for them)
            for path in (r.gitdir, os.path.join(self.dir, f"ws{ws}.objects")):
                if path:
                    shutil.rmtree(path, ignore_errors=True)

    def record(self, ws: int, rel: str) -> bool:
        """A path of workspace ``ws`` changed (the feed's notification); cookies resolve here.

        True when ``rel`` is a cookie (nothing else to do for it).
        """
        name = rel.rpartition("/")[2]
        if name.startswith(COOKIE_PREFIX):
            fut = self._cookies.get(name)
            if fut is not None and not fut.done():
                fut.set_result(None)
            return True
        self.repo(ws).journal.record(rel)
        return False

    async def barrier(self, cookie_dir: str) -> bool:
        """Create and remove a cookie in ``cookie_dir``; True once the feed reported it."""
        name = f"{COOKIE_PREFIX}{os.getpid()}-{next(self._names)}"
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._cookies[name] = fut
        path = os.path.join(cookie_dir, name)
        try:
            await asyncio.to_thread(_touch_and_remove, path)
            async with asyncio.timeout(BARRIER_S):
                await asyncio.shield(fut)
            return True
        except (OSError, TimeoutError):
            return False
        finally:
            self._cookies.pop(name, None)

    def prepare(self) -> None:
        os.makedirs(self.dir, mode=0o700, exist_ok=True)
        if not self._swept:  # git directories and objects an earlier daemon copied
            for name in os.listdir(self.dir):
                if name.endswith((".git", ".objects")):
                    shutil.rmtree(os.path.join(self.dir, name), ignore_errors=True)
            self._swept = True
        if not os.path.exists(self.hook):
            tmp = self.hook + ".tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(HOOK_SCRIPT)
            os.chmod(tmp, 0o700)
            os.replace(tmp, self.hook)

    def private_index(self, r: Repo, root: str, stale: bool) -> str:
        """The private copy of ``root``'s index, copied again when ``stale``."""
        mine = os.path.join(self.dir, f"ws{r.ws}.index")
        if stale or not os.path.exists(mine):
            tmp = mine + ".tmp"
            shutil.copyfile(os.path.join(root, ".git", "index"), tmp)
            os.replace(tmp, mine)
            r.token = ""  # its extensions are the repository's, not ours
        return mine

    def stale(self, r: Repo, synced: bool) -> tuple[bool, bool]:
        """(the index copy, the git directory copy) that must be made again before this run."""
        if not synced or r.seen < 0:
            return True, True  # the journal may lag: copy both
        since = r.journal.since(r.seen)
        return (True, True) if since is None else gitdir.stale(since)

    async def refresh(self, r: Repo, root: str) -> None:
        """Copy ``root``'s git directory again, or say why git must read the repository's."""
        old, r.gitdir = r.gitdir, ""
        real = os.path.join(root, ".git")
        dest = os.path.join(self.dir, f"ws{r.ws}-{next(self._copies)}.git")
        objects = os.path.join(self.dir, f"ws{r.ws}.objects")
        # the configuration git reads in the repository: trusted, and how it reads
        ceiling = {"GIT_CEILING_DIRECTORIES": os.path.dirname(root)}
        listing = await _git(["-C", root, *CONFIG_LIST], ceiling)
        r.config_files = gitdir.config_files(listing or b"", dict(os.environ))
        r.config_key = await asyncio.to_thread(gitdir.files_key, r.config_files)
        why = "git cannot list the repository's configuration" if listing is None else ""
        if r.stored > OBJECTS_MAX:  # HEAD's commit and root tree of each copy: keep a bound
            await asyncio.to_thread(shutil.rmtree, objects, True)
            r.stored = 0
        why = why or await asyncio.to_thread(gitdir.mirror, real, dest, objects)
        if not why:
            mine = await _git(["--git-dir", dest, *CONFIG_LIST], {})
            why = gitdir.config_problem(listing or b"", mine or b"")
        if not why:  # the objects every status reads, out of the repository's store
            batch = await _git(
                ["--git-dir", dest, "cat-file", "--batch"], {}, b"HEAD\nHEAD^{tree}\n"
            )
            algo = gitdir.object_format(listing or b"")
            r.stored += await asyncio.to_thread(gitdir.store_objects, objects, batch or b"", algo)
            r.gitdir = dest
        r.why = why
        for path in (old, "" if r.gitdir else dest):
            if path:
                await asyncio.to_thread(shutil.rmtree, path, True)

    def reply(self, r: Repo) -> list[str] | None:
        """The hook's answer for the token the private index holds (on the loop, as the journal)."""
        old = _seq_of(r.token, self.boot)
        since = None if old is None else r.journal.since(old)
        paths = None if since is None else reply_paths(since)
        if paths is None:
            r.trivial += 1
        return paths

    def write_reply(self, r: Repo, new_token: str, paths: list[str] | None) -> str:
        """The hook's files for this run: the expected token, its answer, the trivial one."""
        base = os.path.join(self.dir, f"ws{r.ws}")
        for suffix, data in (
            (".expect", r.token.encode()),
            (".reply", encode(new_token, paths)),
            (".trivial", encode(new_token, None)),
        ):
            with open(base + suffix, "wb") as f:
                f.write(data)
        return base

    async def run(self, r: Repo, root: str, args: list[str], synced: bool) -> GitRun:
        """``git status ARGS`` in ``root`` through the private copies (caller holds r.lock)."""
        loop = asyncio.get_running_loop()
        self.prepare()
        seq = r.journal.seq  # what the feed reported from here on is checked by the next run
        index_stale, dir_stale = self.stale(r, synced)
        if not dir_stale:  # ~/.gitconfig and the like
            dir_stale = await asyncio.to_thread(gitdir.files_key, r.config_files) != r.config_key
        index = await loop.run_in_executor(None, self.private_index, r, root, index_stale)
        if dir_stale:
            await self.refresh(r, root)
        r.seen = seq
        if not synced:
            r.token = ""  # the barrier failed: the journal may lag, check everything
        new_token = f"tenantry:{self.boot}:{r.journal.seq}"
        base = await loop.run_in_executor(None, self.write_reply, r, new_token, self.reply(r))
        env = _repository_env({"GIT_INDEX_FILE": index, "TENANTRY_GIT_REPLY": base})
        env.pop("GIT_OPTIONAL_LOCKS", None)  # the private index is ours to write
        env.pop("PWD", None)  # (the hook's shell would stat it and its cwd, the work tree)
        if r.gitdir:
            env.update(GIT_DIR=r.gitdir, GIT_WORK_TREE=root)
        t0 = time.perf_counter()
        proc = await asyncio.create_subprocess_exec(
            "git",
            "-C",
            root,
            "-c",
            f"core.fsmonitor={self.hook}",
            "-c",
            "core.fsmonitorHookVersion=2",
            "-c",
            "core.untrackedCache=true",
            "-c",
            "core.splitIndex=false",  # a split index would write sharedindex files in .git
            "-c",
            "core.commitGraph=false",  # caches of the object store: the answer is the same
            "-c",
            "core.multiPackIndex=false",  # without them, and they are not looked up
            "status",
            *args,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
        )
        out, err = await proc.communicate()
        r.runs += 1
        rc = proc.returncode if proc.returncode is not None else 1
        # the private index holds the new token only if git wrote it; if not, the
        # next run's token differs from the expected one and gets the trivial answer
        r.token = new_token if rc == 0 else ""
        return GitRun(out, err, rc, time.perf_counter() - t0, bool(r.gitdir))


@dataclass(frozen=True, slots=True)
class GitRun:
    stdout: bytes
    stderr: bytes
    rc: int
    elapsed_s: float
    private: bool = False  # git read the private copy of the git directory


# git's settings that name a repository: never the daemon's own
REPOSITORY_ENV = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_COMMON_DIR",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_IMPLICIT_WORK_TREE",
    "GIT_PREFIX",
)
CONFIG_LIST = ["config", "--list", "-z", "--show-scope", "--show-origin"]


def _repository_env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in REPOSITORY_ENV}
    env.update(extra)
    return env


async def _git(args: list[str], extra: dict[str, str], stdin: bytes = b"") -> bytes | None:
    """``git ARGS``' output, or None when it fails."""
    proc = await asyncio.create_subprocess_exec(
        "git",
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env=_repository_env(extra),
    )
    out, _ = await proc.communicate(stdin)
    return out if proc.returncode == 0 else None


def _seq_of(token: str, boot: str) -> int | None:
    prefix = f"tenantry:{boot}:"
    if not token.startswith(prefix):
        return None
    with contextlib.suppress(ValueError):
        return int(token[len(prefix) :])
    return None


def _touch_and_remove(path: str) -> None:
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o600)
    os.close(fd)
    os.unlink(path)
