"""Reading the file system: one directory at a time, in worker threads.

``scan_dir`` is the only function that touches the file system for the index.
It stats the directory, lists it (``os.scandir``, one ``lstat`` per child),
drops ignored children, and reads the text of files that are new or changed
compared with what the index holds. It returns a ``DirScan``; deciding what to
write is the store's job. The crawler runs many ``scan_dir`` calls at once
(threads), which is what hides per-operation latency on a parallel file system.

Binary detection follows ripgrep: a file with a NUL byte is binary and its
content is not indexed (its path and stat still are). Nor is a credential's
(``core.secrets``: keys, tokens, anything under ``.ssh`` or ``.aws``): its file
is not even opened, so no key is ever served by ``tenantry grep`` or copied into
the index's database.
"""

# (hot paths: plain string paths and os calls, no Path object per file)
from __future__ import annotations

import errno
import os
import stat
import time
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tenantry.core.secrets import is_secret_file, own_home
from tenantry.index.changes import COOKIE_PREFIX
from tenantry.index.ignore import IGNORE_FILES, Rules, compile_rules, is_ignored

# entries.text values
TEXT_NONE, TEXT_INDEXED, TEXT_BINARY, TEXT_TOO_LARGE, TEXT_UNREADABLE = 0, 1, 2, 3, 4
TEXT_SECRET = 5  # a credential's file: never read


def secret(path: str) -> bool:
    """Is the file at absolute ``path`` a credential whose text the index keeps out?"""
    return is_secret_file(path, own_home())


RACY_S = 2.0  # a timestamp this fresh may hide a change made in the same clock tick


@dataclass(slots=True)
class Known:
    """What the index holds for one child: enough to decide whether it changed."""

    id: int
    kind: str
    size: int
    mtime_ns: int
    mode: int


@dataclass(slots=True)
class Found:
    """One child as seen on disk, with its text when it had to be (re)read."""

    name: str
    kind: str
    size: int
    mtime_ns: int
    mode: int
    text_state: int = TEXT_NONE
    text: str | None = None  # decoded text to index (new or changed text files only)
    blob: bytes | None = None  # zlib of the raw bytes
    racy: bool = False  # mtime too fresh to trust for change detection


@dataclass(slots=True)
class DirScan:
    rel: str
    exists: bool
    size: int = 0
    mtime_ns: int = 0
    mode: int = 0
    racy: bool = False
    rules: Rules | None = None
    found: list[Found] = field(default_factory=list)
    stats: int = 0  # file-system operations spent (stat, readdir, open)
    readable: bool = True  # False: it exists but cannot be listed (kept as it is)


def _failed(rel: str, exc: OSError) -> DirScan:
    """A directory that vanished (or is no longer one), or one we may not list."""
    gone = exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP)
    return DirScan(rel, exists=not gone, readable=False, stats=1)


def kind_of(mode: int) -> str:
    if stat.S_ISREG(mode):
        return "f"
    if stat.S_ISDIR(mode):
        return "d"
    if stat.S_ISLNK(mode):
        return "l"
    return "o"


def join(rel: str, name: str) -> str:
    return f"{rel}/{name}" if rel else name


def read_text(
    name: str, max_bytes: int, dir_fd: int | None = None
) -> tuple[int, str | None, bytes | None]:
    """(text state, decoded text, compressed raw bytes) of one regular file."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
    except OSError:
        return TEXT_UNREADABLE, None, None
    try:
        return _read_fd(fd, max_bytes)
    finally:
        os.close(fd)


def _read_fd(fd: int, max_bytes: int) -> tuple[int, str | None, bytes | None]:
    try:
        chunks = []
        left = max_bytes + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        raw = b"".join(chunks)
    except OSError:
        return TEXT_UNREADABLE, None, None
    if len(raw) > max_bytes:
        return TEXT_TOO_LARGE, None, None
    if b"\0" in raw:
        return TEXT_BINARY, None, None
    return TEXT_INDEXED, raw.decode("utf-8", "surrogateescape"), zlib.compress(raw, 6)


def decode_blob(blob: bytes) -> str:
    return zlib.decompress(blob).decode("utf-8", "surrogateescape")


def load_rules(root: str, rel: str, dir_fd: int | None = None) -> Rules | None:
    """Read and compile the ignore files of one directory (``dir_fd`` if open)."""
    texts = []
    for name in IGNORE_FILES:
        try:
            if dir_fd is not None:
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
            else:
                fd = os.open(os.path.join(root, rel, name), os.O_RDONLY | os.O_NONBLOCK)
        except OSError:
            continue
        with open(fd, "rb") as fh:
            texts.append(fh.read(1 << 20).decode("utf-8", "replace"))
    return compile_rules(rel, texts)


def scan_dir(
    root: str,
    rel: str,
    chain: Sequence[Rules],
    known: Mapping[str, Known],
    max_bytes: int,
    force: frozenset[str] = frozenset(),
) -> DirScan:
    """Stat and list ``root/rel``; read text of new/changed files (and ``force``d names).

    ``chain`` is the ignore rules of the directory's ancestors (not the directory
    itself: its own ignore files are read here and returned in ``rules``).
    """
    path = os.path.join(root, rel) if rel else root
    # one open directory handle: every child is reached relative to it (fstatat,
    # openat), so the file system resolves no path more than once
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as exc:
        return _failed(rel, exc)
    try:
        return _scan_fd(fd, rel, chain, known, max_bytes, force, path)
    finally:
        os.close(fd)


def _scan_fd(
    fd: int,
    rel: str,
    chain: Sequence[Rules],
    known: Mapping[str, Known],
    max_bytes: int,
    force: frozenset[str],
    base: str = "",
) -> DirScan:
    now_ns = time.time_ns()
    racy_ns = int(RACY_S * 1e9)
    try:
        st = os.fstat(fd)
        with os.scandir(fd) as it:
            entries = list(it)
    except OSError as exc:
        return _failed(rel, exc)
    out = DirScan(
        rel,
        exists=True,
        size=st.st_size,
        mtime_ns=st.st_mtime_ns,
        mode=st.st_mode,
        racy=now_ns - st.st_mtime_ns < racy_ns,
        stats=3,
    )
    names = {e.name for e in entries}
    if any(n in names for n in IGNORE_FILES):
        out.rules = load_rules("", rel, dir_fd=fd)
        out.stats += 1
    full_chain = [*chain, out.rules] if out.rules is not None else list(chain)
    for entry in entries:
        name = entry.name
        if name.startswith(COOKIE_PREFIX):
            continue  # a change source's flush marker, gone in a moment
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:
            continue  # not representable in the index (undecodable bytes)
        try:
            cst = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        out.stats += 1
        kind = kind_of(cst.st_mode)
        child_rel = join(rel, name)
        if is_ignored(full_chain, child_rel, kind == "d"):
            continue
        found = Found(name, kind, cst.st_size, cst.st_mtime_ns, cst.st_mode)
        if kind == "f":
            found.racy = now_ns - cst.st_mtime_ns < racy_ns
            old = known.get(name)
            if (
                old is None
                or name in force
                or old.kind != kind
                or old.size != found.size
                or old.mtime_ns != found.mtime_ns
            ):
                if base and secret(f"{base}/{name}"):
                    found.text_state = TEXT_SECRET
                elif found.size > max_bytes:
                    found.text_state = TEXT_TOO_LARGE
                else:
                    found.text_state, found.text, found.blob = read_text(name, max_bytes, fd)
                    out.stats += 1
            else:
                found.text_state = -1  # unchanged: keep what the index holds
        out.found.append(found)
    return out


def scan_file(
    root: str, rel: str, max_bytes: int, known: Known | None = None
) -> tuple[Found | None, int]:
    """One file the change source named, without listing its directory; (found, ops).

    With ``known`` (a re-check) the file is only stat'ed, and read again if its
    stat differs; without, it is opened and read (the source said it changed).
    None when it is gone or no longer a regular file: its directory must tell.
    """
    path = os.path.join(root, rel)
    name = rel.rpartition("/")[2]
    now_ns = time.time_ns()
    hidden = secret(path)
    if known is not None or hidden:
        try:
            st = os.lstat(path)
        except OSError:
            return None, 1
        if not stat.S_ISREG(st.st_mode):
            return None, 1
        same = known is not None and (st.st_size, st.st_mtime_ns, st.st_mode) == (
            known.size,
            known.mtime_ns,
            known.mode,
        )
        if hidden or same:  # a credential is never read; an unchanged file keeps its text
            state = TEXT_SECRET if hidden else -1
            found = Found(name, "f", st.st_size, st.st_mtime_ns, st.st_mode, text_state=state)
            found.racy = now_ns - st.st_mtime_ns < int(RACY_S * 1e9)
            return found, 1
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None, 2 if known is not None else 1
    ops = 3 if known is not None else 2
    try:
        st = os.fstat(fd)  # the opened file's own stat: text and stat always agree
        if not stat.S_ISREG(st.st_mode):
            return None, ops
        found = Found(name, "f", st.st_size, st.st_mtime_ns, st.st_mode)
        found.racy = now_ns - st.st_mtime_ns < int(RACY_S * 1e9)
        if st.st_size > max_bytes:
            found.text_state = TEXT_TOO_LARGE
        else:
            found.text_state, found.text, found.blob = _read_fd(fd, max_bytes)
        return found, ops
    finally:
        os.close(fd)


def changed_dirs(root: str, dirs: list[tuple[str, int]]) -> list[str]:
    """Directories whose mtime moved (or the parent of one that vanished)."""
    out = []
    for rel, mtime_ns in dirs:
        try:
            st = os.stat(os.path.join(root, rel) if rel else root, follow_symlinks=False)
        except OSError:
            out.append(rel.rpartition("/")[0] if rel else "")
            continue
        if st.st_mtime_ns != mtime_ns:
            out.append(rel)
    return sorted(set(out))


def stale_paths(root: str, rows: list[tuple[Any, ...]]) -> list[str]:
    """Paths whose kind, size or mtime differ from the index (or that vanished)."""
    out = []
    for rel, kind, size, mtime_ns in rows:
        try:
            st = os.stat(os.path.join(root, rel) if rel else root, follow_symlinks=False)
        except OSError:
            out.append(rel)
            continue
        if kind == "d":
            if st.st_mtime_ns != mtime_ns:
                out.append(rel)
        elif (kind_of(st.st_mode), st.st_size, st.st_mtime_ns) != (kind, size, mtime_ns):
            out.append(rel)
    return out


def existing_paths(root: str, rels: list[str]) -> list[str]:
    """The ``rels`` that exist on disk."""
    out = []
    for rel in rels:
        try:
            os.stat(os.path.join(root, rel), follow_symlinks=False)
        except OSError:
            continue
        out.append(rel)
    return out
