"""A read-only FUSE passthrough that delays every metadata operation and counts them.

It stands in for a parallel file system's metadata server: each ``lookup``,
``getattr``, ``opendir``, ``readdir``, ``open``, ``readlink`` and ``statfs`` that
reaches it waits ``delay`` seconds (asynchronously, so concurrent callers overlap
as they would against a real server) before being served from the source
directory. Data reads are passed through undelayed. Kernel attribute and entry
caching is off by default (timeouts 0), so every operation an application
causes reaches the counter.

With ``FUSEDELAY_TRACE=FILE`` in the environment every delayed operation that
names its caller is appended to FILE (time, operation, pid, the caller's command
line): what the counters cannot say is who spent the operations.

Run as a child process: ``serve(source, mountpoint, delay, counters)`` where
``counters`` is a ``multiprocessing.Array('q', len(OPS))`` the parent reads;
``by_uid`` (a ``multiprocessing.Array('q', UID_SLOTS)``) counts the delayed
operations per caller uid (``readdir`` under the uid that opened the
directory; uids from ``UID_SLOTS - 1`` up in the last slot).
Needs pyfuse3 (LGPL-2.0+, bench only) with Debian fuse3 and libfuse3-dev.
"""

from __future__ import annotations

import errno
import os
import stat
import time
from typing import Any

OPS = ("lookup", "getattr", "opendir", "readdir", "open", "readlink", "statfs", "read")
DELAYED = frozenset(OPS) - {"read"}
UID_SLOTS = 1 << 16


def serve(
    source: str,
    mountpoint: str,
    delay: float,
    counters: Any,
    cache_s: float = 0.0,
    extra_options: tuple[str, ...] = (),
    by_uid: Any = None,
) -> None:
    import pyfuse3
    import trio

    index = {name: i for i, name in enumerate(OPS)}
    trace_path = os.environ.get("FUSEDELAY_TRACE")
    TRACE = open(trace_path, "a", buffering=1 << 16) if trace_path else None
    callers: dict[int, tuple[str, float]] = {}  # pid: command line, when read

    class Passthrough(pyfuse3.Operations):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.paths: dict[int, str] = {pyfuse3.ROOT_INODE: source}
            self.inodes: dict[str, int] = {source: pyfuse3.ROOT_INODE}
            self.next_ino = pyfuse3.ROOT_INODE + 1
            self.dirs: dict[int, list[str]] = {}
            self.dir_uids: dict[int, int] = {}  # directory handle: the uid that opened it
            self.files: dict[int, int] = {}
            self.next_fh = 1

        async def _op(
            self, name: str, ctx: Any = None, what: str = "", uid: int | None = None
        ) -> None:
            if by_uid is not None and name in DELAYED:
                who_uid = ctx.uid if ctx is not None else uid
                if who_uid is not None:
                    with by_uid.get_lock():
                        by_uid[min(int(who_uid), UID_SLOTS - 1)] += 1
            if TRACE is not None and ctx is not None:
                now = time.monotonic()
                who, seen = callers.get(ctx.pid, ("", 0.0))
                if now - seen > 0.5:  # re-read twice a second: pids are reused
                    try:
                        with open(f"/proc/{ctx.pid}/cmdline", "rb") as f:
                            who = f.read(300).replace(b"\0", b" ").decode(errors="replace")
                    except OSError:
                        who = "?"
                    callers[ctx.pid] = (who, now)
                TRACE.write(f"{time.time():.3f}\t{name}\t{ctx.pid}\t{who}\t{what}\n")
            with counters.get_lock():
                counters[index[name]] += 1
            if delay > 0 and name in DELAYED:
                await trio.sleep(delay)

        def _ino(self, path: str) -> int:
            ino = self.inodes.get(path)
            if ino is None:
                ino = self.next_ino
                self.next_ino += 1
                self.inodes[path] = ino
                self.paths[ino] = path
            return ino

        def _attrs(self, path: str) -> Any:
            try:
                st = os.lstat(path)
            except OSError as exc:
                raise pyfuse3.FUSEError(exc.errno or errno.EIO) from exc
            a = pyfuse3.EntryAttributes()
            a.st_ino = self._ino(path)
            a.st_mode = st.st_mode
            a.st_nlink = st.st_nlink
            a.st_uid = st.st_uid
            a.st_gid = st.st_gid
            a.st_rdev = st.st_rdev
            a.st_size = st.st_size
            a.st_blksize = st.st_blksize
            a.st_blocks = st.st_blocks
            a.st_atime_ns = st.st_atime_ns
            a.st_mtime_ns = st.st_mtime_ns
            a.st_ctime_ns = st.st_ctime_ns
            a.generation = 0
            a.entry_timeout = cache_s
            a.attr_timeout = cache_s
            return a

        def _path(self, inode: int) -> str:
            path = self.paths.get(inode)
            if path is None:
                raise pyfuse3.FUSEError(errno.ENOENT)
            return path

        async def lookup(self, parent_inode: int, name: bytes, ctx: Any = None) -> Any:
            parent = self.paths.get(parent_inode, "")
            await self._op("lookup", ctx, os.path.join(parent, os.fsdecode(name)))
            return self._attrs(os.path.join(self._path(parent_inode), os.fsdecode(name)))

        async def getattr(self, inode: int, ctx: Any = None) -> Any:
            await self._op("getattr", ctx, self.paths.get(inode, ""))
            return self._attrs(self._path(inode))

        async def readlink(self, inode: int, ctx: Any) -> bytes:
            await self._op("readlink", ctx)
            return os.fsencode(os.readlink(self._path(inode)))

        async def opendir(self, inode: int, ctx: Any) -> int:
            await self._op("opendir", ctx, self.paths.get(inode, ""))
            path = self._path(inode)
            try:
                names = sorted(os.listdir(path))
            except OSError as exc:
                raise pyfuse3.FUSEError(exc.errno or errno.EIO) from exc
            fh = self.next_fh
            self.next_fh += 1
            self.dirs[fh] = [os.path.join(path, n) for n in names]
            self.dir_uids[fh] = ctx.uid
            return fh

        async def readdir(self, fh: int, start_id: int, token: Any) -> None:
            await self._op("readdir", uid=self.dir_uids.get(fh))
            entries = self.dirs.get(fh, [])
            for i in range(start_id, len(entries)):
                path = entries[i]
                try:
                    attrs = self._attrs(path)
                except pyfuse3.FUSEError:
                    continue
                if not pyfuse3.readdir_reply(
                    token, os.fsencode(os.path.basename(path)), attrs, i + 1
                ):
                    break

        async def releasedir(self, fh: int) -> None:
            self.dirs.pop(fh, None)
            self.dir_uids.pop(fh, None)

        async def open(self, inode: int, flags: int, ctx: Any) -> Any:
            await self._op("open", ctx, self.paths.get(inode, ""))
            if flags & (os.O_WRONLY | os.O_RDWR):
                raise pyfuse3.FUSEError(errno.EROFS)
            try:
                fd = os.open(self._path(inode), os.O_RDONLY)
            except OSError as exc:
                raise pyfuse3.FUSEError(exc.errno or errno.EIO) from exc
            fh = self.next_fh
            self.next_fh += 1
            self.files[fh] = fd
            return pyfuse3.FileInfo(fh=fh)

        async def read(self, fh: int, off: int, size: int) -> bytes:
            await self._op("read")
            return os.pread(self.files[fh], size, off)

        async def release(self, fh: int) -> None:
            fd = self.files.pop(fh, None)
            if fd is not None:
                os.close(fd)

        async def statfs(self, ctx: Any) -> Any:
            await self._op("statfs", ctx)
            st = os.statvfs(source)
            out = pyfuse3.StatvfsData()
            for attr in (
                "f_bsize",
                "f_frsize",
                "f_blocks",
                "f_bfree",
                "f_bavail",
                "f_files",
                "f_ffree",
                "f_favail",
                "f_namemax",
            ):
                setattr(out, attr, getattr(st, attr))
            return out

        async def access(self, inode: int, mode: int, ctx: Any) -> bool:
            return True

        async def forget(self, inode_list: Any) -> None:
            return None

    options = set(pyfuse3.default_options)
    options |= {"fsname=tenantry-bench", "ro", *extra_options}
    pyfuse3.init(Passthrough(), mountpoint, options)
    try:
        trio.run(pyfuse3.main)
    finally:
        pyfuse3.close(unmount=False)
        if TRACE is not None:
            TRACE.close()


def is_dir(path: str) -> bool:
    try:
        return stat.S_ISDIR(os.stat(path).st_mode)
    except OSError:
        return False
