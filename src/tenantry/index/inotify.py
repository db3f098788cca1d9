"""A recursive inotify watch read on the event loop, so a query can drain it.

The kernel queues an inotify event before the system call that made the change
returns. Reading this watch's descriptor until it would block therefore
delivers every change made under its trees before the read began: ``drain()``
is the freshness barrier of a query, with no cookie file and no thread hop.
(watchdog reads its descriptor on its own threads and hands events through
two queues, so only a cookie can tell when it has caught up.)

One descriptor for every watched tree; one watch per directory, added before
the directory is listed (a file made in a new directory before its watch
existed is found by that listing and reported). A tree's first walk runs on a
worker thread (``add_tree``; a large workspace takes seconds), the rest on the
loop; the watch tables are shared under one lock. Only changes are asked for
(no opens, reads or closes without a write: the index's own reads cost
nothing). Events are reported as ``notify(path, what)`` (``changes.Notify``):
``what = MODIFIED`` for a write, truncate or attribute change of a file,
nothing else for a create, delete, rename (both ends, and every entry under a
renamed directory) or a directory's attributes. A queue overflow calls
``lost()`` and re-adds the watches of every tree.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import threading
from collections.abc import Callable

import inotify_simple

from tenantry.index.changes import MODIFIED, Notify

log = logging.getLogger(__name__)

IN_MODIFY = 0x002
IN_ATTRIB = 0x004
IN_CLOSE_WRITE = 0x008
IN_MOVED_FROM = 0x040
IN_MOVED_TO = 0x080
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_DELETE_SELF = 0x400
IN_Q_OVERFLOW = 0x4000
IN_IGNORED = 0x8000
IN_ONLYDIR = 0x0100_0000
IN_DONT_FOLLOW = 0x0200_0000
IN_EXCL_UNLINK = 0x0400_0000
IN_ISDIR = 0x4000_0000

MASK = (
    IN_MODIFY
    | IN_ATTRIB
    | IN_CLOSE_WRITE
    | IN_MOVED_FROM
    | IN_MOVED_TO
    | IN_CREATE
    | IN_DELETE
    | IN_DELETE_SELF
    | IN_ONLYDIR
    | IN_DONT_FOLLOW
    | IN_EXCL_UNLINK
)
_FILE_CHANGED = IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE
READ_BYTES = 64 * 1024
READS_PER_WAKEUP = 16  # the loop's callback: then other work runs (and it is called again)


def parse(buf: bytes) -> list[tuple[int, int, int, str]]:
    """The ``(wd, mask, cookie, name)`` of each ``struct inotify_event`` in ``buf``."""
    return [(e.wd, e.mask, e.cookie, e.name) for e in inotify_simple.parse_events(buf)]


class InotifyTree:
    """Recursive inotify watches of whole directory trees on one descriptor."""

    def __init__(self, notify: Notify, lost: Callable[[], None]) -> None:
        self._notify = notify
        self._lost = lost
        self._ino: inotify_simple.INotify | None = None
        self.fd = -1
        self.roots: set[str] = set()
        self.partial: set[str] = set()  # roots with a directory that could not be watched
        self._dir_of: dict[int, str] = {}  # watch descriptor -> directory
        self._wd_of: dict[str, int] = {}
        self._moving: dict[int, str] = {}  # a directory's IN_MOVED_FROM, by cookie
        self.lock = threading.Lock()  # the tables, between the loop and a first walk

    def open(self) -> None:
        self._ino = inotify_simple.INotify(nonblocking=True)  # close-on-exec
        self.fd = self._ino.fileno()

    def close(self) -> None:
        if self._ino is not None:
            self._ino.close()
        self._ino = None
        self.fd = -1
        self._dir_of.clear()
        self._wd_of.clear()
        self.roots.clear()

    # --- watches ---------------------------------------------------------

    def add(self, root: str) -> None:
        """Watch ``root`` itself (OSError when that fails); ``add_tree`` does the rest."""
        with self.lock:
            self._add_watch(root)  # raises: the caller reports it
            self.roots.add(root)
            self.partial.discard(root)

    def add_tree(self, root: str) -> None:
        """Watch every directory under ``root`` (any thread; stops if it is removed)."""
        self._add_tree(root, report=False, locked=True)

    def remove(self, root: str) -> None:
        with self.lock:
            self.roots.discard(root)
            self.partial.discard(root)
            for path in [p for p in self._wd_of if _within(p, root)]:
                self._rm_watch(path)

    def _add_watch(self, path: str) -> None:
        assert self._ino is not None
        try:
            wd: int = self._ino.add_watch(path, MASK)
        except OSError as exc:
            raise OSError(exc.errno, f"inotify_add_watch {path}: {exc.strerror}") from exc
        old = self._dir_of.get(wd)
        if old is not None and old != path:
            self._wd_of.pop(old, None)
        self._dir_of[wd] = path
        self._wd_of[path] = wd

    def _rm_watch(self, path: str) -> None:
        wd = self._wd_of.pop(path, None)
        if wd is None:
            return
        self._dir_of.pop(wd, None)
        if self._ino is not None:
            with contextlib.suppress(OSError):  # EINVAL if already gone: fine
                self._ino.rm_watch(wd)

    def _add_tree(self, top: str, *, report: bool, locked: bool = False) -> None:
        """Watch the directories under ``top`` (watched itself), each before it is listed.

        ``report``: notify every entry found (a tree that appeared at once).
        ``locked``: take the lock per directory (a walk off the loop), and stop
        once ``top`` is no longer watched.
        """
        for base, dirs, files in os.walk(top):
            kept = []
            for d in dirs:
                path = os.path.join(base, d)
                if os.path.islink(path):
                    continue
                try:
                    if locked:
                        with self.lock:
                            if top not in self.roots:
                                return
                            self._add_watch(path)
                    else:
                        self._add_watch(path)
                    kept.append(d)
                except OSError as exc:
                    if exc.errno not in (errno.ENOENT, errno.ENOTDIR):
                        with self.lock if locked else contextlib.nullcontext():
                            self._mark_partial(path, exc)
            dirs[:] = kept
            if report:
                for name in (*dirs, *files):
                    self._notify(os.path.join(base, name), "")

    def _mark_partial(self, path: str, exc: OSError) -> None:
        for root in self.roots:
            if _within(path, root) and root not in self.partial:
                log.warning("cannot watch %s: %s; queries of %s flush by a cookie", path, exc, root)
                self.partial.add(root)

    # --- events ----------------------------------------------------------

    def read(self, most: int | None = None) -> int:
        """Handle the events queued now (at most ``most`` reads of them); returns how many.

        Without ``most`` it reads until the descriptor would block: every change
        made before the call has been reported when it returns (a drain). The
        loop's reader callback passes a bound, so a long burst of changes does
        not hold the loop in one callback.
        """
        with self.lock:
            return self._read(most)

    def on_readable(self) -> None:
        self.read(READS_PER_WAKEUP)

    def _read(self, most: int | None) -> int:
        n = reads = 0
        drained = False
        while self.fd >= 0 and (most is None or reads < most):
            try:
                buf = os.read(self.fd, READ_BYTES)
            except BlockingIOError:
                drained = True
                break
            except InterruptedError:
                continue
            reads += 1
            events = parse(buf)
            n += len(events)
            for wd, mask, cookie, name in events:
                self._event(wd, mask, cookie, name)
        if drained:  # a rename's two halves are queued together: these left the trees
            for path in self._moving.values():
                for sub in [p for p in self._wd_of if _within(p, path)]:
                    self._rm_watch(sub)
            self._moving.clear()
        return n

    def _event(self, wd: int, mask: int, cookie: int, name: str) -> None:
        if mask & IN_Q_OVERFLOW:
            self._overflowed()
            return
        if mask & IN_IGNORED:
            path = self._dir_of.pop(wd, None)
            if path is not None and self._wd_of.get(path) == wd:
                del self._wd_of[path]
            return
        base = self._dir_of.get(wd)
        if base is None:
            return
        path = os.path.join(base, name) if name else base
        is_dir = bool(mask & IN_ISDIR)
        if mask & IN_DELETE_SELF:
            self._notify(path, "")
        elif not is_dir:
            self._notify(path, MODIFIED if mask & _FILE_CHANGED else "")
        elif mask & IN_MOVED_FROM:
            self._moving[cookie] = path
            self._notify(path, "")
        elif mask & IN_MOVED_TO:
            self._moved_in(path, self._moving.pop(cookie, None))
        elif mask & IN_CREATE:
            self._appeared(path)
        elif mask & IN_ATTRIB:
            self._notify(path, "")

    def _appeared(self, path: str) -> None:
        try:
            self._add_watch(path)
        except OSError as exc:
            if exc.errno not in (errno.ENOENT, errno.ENOTDIR):
                self._mark_partial(path, exc)
            self._notify(path, "")
            return
        self._notify(path, "")
        self._add_tree(path, report=True)

    def _moved_in(self, path: str, src: str | None) -> None:
        """A directory renamed to ``path``, from ``src`` in a watched tree (None: outside)."""
        if src is None:
            self._appeared(path)
            return
        for old in [p for p in self._wd_of if _within(p, src)]:  # the watches moved along
            wd = self._wd_of.pop(old)
            new = path + old[len(src) :]
            self._dir_of[wd] = new
            self._wd_of[new] = wd
        self._notify(path, "")
        for base, dirs, files in os.walk(path):
            for name in (*dirs, *files):
                self._notify(os.path.join(base, name), "")
                self._notify(os.path.join(src + base[len(path) :], name), "")

    def _overflowed(self) -> None:
        self._lost()
        for root in list(self.roots):  # on the loop: an overflow is rare
            try:
                self._add_watch(root)
                self._add_tree(root, report=False)
            except OSError as exc:
                self._mark_partial(root, exc)


def _within(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")
