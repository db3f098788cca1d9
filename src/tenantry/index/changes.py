"""Change sources: who tells the index that a path may have changed.

The index keeps itself fresh from three signals: the gateway's own
``command.finished`` events, a periodic sweep that stats directories only, and
a **change source** — something that learns about changes as they happen. On a
local file system that is inotify (``WatchdogSource``); on Lustre it would be
the MDT changelog. A change source implements ``ChangeSource``:

``watch(root)`` / ``unwatch(root)``
    start and stop following one workspace (an absolute directory).
``start(notify)``
    begin delivering. ``notify(path, what="")`` is thread-safe and takes an
    absolute path that may have been created, modified, deleted, or renamed
    (call it for both ends of a rename). With ``what=MODIFIED`` the source says
    that only the contents or attributes of the file at ``path`` changed (a
    write, a truncate, a chmod; Lustre's CLOSE, MTIME, SATTR and TRUNC records):
    the index then re-reads that file alone. Otherwise it re-lists the path's
    parent directory and compares stats. Either way it is a hint: spurious or
    duplicate calls cost a file read or a directory scan and never corrupt
    anything (a MODIFIED path that turns out to be new, gone or no longer a
    file is looked up in its directory); coalescing happens in the index.
``aclose()``
    stop and release everything.

Optionally ``complete(root)`` (True when the source sees *every* change under
``root``, whoever makes it) and ``cookie_dir(root)`` (a directory it watches
where a file may be created to flush the feed): with both, queries wait for a
cookie instead of trusting time (every change made before the query is
applied first), and ``tenantry git status`` trusts the feed
(``tenantry.index.gitstatus``). ``backed(root)`` says the source watches a
different tree than the one the index reads (see below), whose client caches
may lag the event: a file refreshed then is checked once more. inotify sees
the changes made through this host's kernel, so it is complete on a local file
system and not on a network or FUSE mount, where other hosts (or the server)
change files unseen; there a *backing* directory can be watched instead
(``index_watch_backing = "MOUNT=BACKING"``): the server-side tree of a FUSE
passthrough or an NFS export on this host, which sees every change, as a
Lustre changelog would.

A Lustre adapter would register a changelog user (``lctl changelog_register``),
read records with ``lfs changelog MDT [startrec]``, turn each record's parent
FID and name into a path (``lfs fid2path``; records of type CREAT, MKDIR,
UNLNK, RMDIR, RENME, RNMTO, CLOSE, MTIME, SATTR, TRUNC), call ``notify`` for
paths under a watched root, and acknowledge with ``lfs changelog_clear``. No
Lustre is available here, so only the interface and the inotify source ship.
"""

from __future__ import annotations

import asyncio
import logging
import os
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from tenantry.core.errors import UsageError

if TYPE_CHECKING:
    from tenantry.index.inotify import InotifyTree

log = logging.getLogger(__name__)

# ``what`` of a notification: only this file's contents or attributes changed
MODIFIED = "modified"
# a file the index creates to flush a change source (never indexed, never reported)
COOKIE_PREFIX = ".tenantry-cookie-"


class Notify(Protocol):
    def __call__(self, path: str, what: str = "", /) -> None: ...


class ChangeSource(Protocol):
    def watch(self, root: str) -> None: ...

    def unwatch(self, root: str) -> None: ...

    async def start(self, notify: Notify) -> None: ...

    async def aclose(self) -> None: ...


# file systems whose every change goes through this host's kernel (inotify sees it)
LOCAL_FS = frozenset(
    {"ext2", "ext3", "ext4", "xfs", "btrfs", "tmpfs", "ramfs", "f2fs", "zfs", "jfs", "overlay"}
)


def fs_type(path: str, mounts: str = "/proc/self/mounts") -> str:
    """The type of the file system holding ``path`` (longest mount point), or ""."""
    best, kind = "", ""
    try:
        with open(mounts, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        return ""
    for line in lines:
        parts = line.split()
        if len(parts) < 3:
            continue
        point = parts[1].replace("\\040", " ")
        if (path == point or path.startswith(point.rstrip("/") + "/")) and len(point) >= len(best):
            best, kind = point, parts[2]
    return kind


def parse_backing(text: str) -> dict[str, str]:
    """``"MOUNT=BACKING,MOUNT2=BACKING2"`` -> {MOUNT: BACKING} (absolute, normalized)."""
    out: dict[str, str] = {}
    for item in (x.strip() for x in text.split(",")):
        if not item:
            continue
        mount, sep, backing = item.partition("=")
        if not sep or not os.path.isabs(mount) or not os.path.isabs(backing):
            raise UsageError(
                f"index_watch_backing: {item!r} is not MOUNT=BACKING",
                hint="absolute paths, e.g. /scratch=/export/scratch; several separated by ','",
            )
        out[os.path.normpath(mount)] = os.path.normpath(backing)
    return out


def _under(path: str, base: str) -> str | None:
    """``path`` relative to ``base`` ("" for itself), or None when outside."""
    if path == base:
        return ""
    if path.startswith(base.rstrip("/") + "/"):
        return path[len(base.rstrip("/")) + 1 :]
    return None


class ManualSource:
    """A change source fed by hand (tests, or a bridge from another process)."""

    def __init__(self) -> None:
        self.roots: set[str] = set()
        self._notify: Notify | None = None

    def watch(self, root: str) -> None:
        self.roots.add(root)

    def unwatch(self, root: str) -> None:
        self.roots.discard(root)

    async def start(self, notify: Notify) -> None:
        self._notify = notify

    def changed(self, path: str, what: str = "") -> None:
        if self._notify is not None:
            self._notify(path, what)

    async def aclose(self) -> None:
        self._notify = None


# inotify reports our own reads (open, close-without-write): never react to them
_IGNORED_EVENTS = frozenset({"opened", "closed_no_write"})
_FILE_EVENTS = frozenset({"modified", "closed", "attrib"})


class WatchdogSource:
    """inotify: changes arrive within milliseconds.

    A root on a local file system is watched by ``InotifyTree`` on the event
    loop (``tenantry.index.inotify``), so ``drain(root)`` delivers every change
    made before it. Any other root goes through ``watchdog``'s threads.
    ``backing`` maps a mount point to the directory that holds its files on
    this host: a root under such a mount is followed there (through watchdog),
    and events are reported under the root.
    """

    def __init__(self, backing: dict[str, str] | None = None) -> None:
        self._observer: Any = None
        self._watches: dict[str, Any] = {}
        self._pending: set[str] = set()
        self._notify: Notify | None = None
        self.failed: dict[str, str] = {}
        self.backing = dict(backing or {})
        self._complete: dict[str, bool] = {}
        # called with each watched root when the kernel dropped events (inotify queue
        # overflow, which watchdog only logs): what was not reported must be assumed
        self.on_lost: Callable[[str], None] | None = None
        # ``notify`` for the roots read on the event loop, called there (the
        # index's own, not its thread-safe hop); ``start``'s when unset
        self.notify_on_loop: Notify | None = None
        self._overflow = _OverflowHandler(self)
        self._tree: InotifyTree | None = None
        self._walks: dict[str, asyncio.Future[None]] = {}  # first walks under way
        self._loop: asyncio.AbstractEventLoop | None = None

    def lost(self) -> None:
        for root in list(self._watches):
            if self.on_lost is not None:
                self.on_lost(root)

    def watched_path(self, root: str) -> tuple[str, bool]:
        """Where ``root`` is followed, and whether that is a backing directory."""
        for mount, backing in sorted(self.backing.items(), key=lambda kv: -len(kv[0])):
            rel = _under(root, mount)
            if rel is not None:
                return (os.path.join(backing, rel) if rel else backing), True
        return root, False

    def complete(self, root: str) -> bool:
        """Every change under ``root`` reaches this source (see the module's docstring)."""
        if root not in self._watches:
            return False
        if root not in self._complete:
            where, backed = self.watched_path(root)
            self._complete[root] = backed or fs_type(where) in LOCAL_FS
        return self._complete[root]

    def backed(self, root: str) -> bool:
        return self.watched_path(root)[1]

    def cookie_dir(self, root: str) -> str:
        """``.git`` of the watched tree (a repository), else the watched root itself."""
        where = self.watched_path(root)[0]
        git = os.path.join(where, ".git")
        return git if os.path.isdir(git) else where

    async def start(self, notify: Notify) -> None:
        from tenantry.index.inotify import InotifyTree

        self._notify = notify
        self._loop = asyncio.get_running_loop()
        tree = InotifyTree(self._tree_notify, self.lost)
        try:
            tree.open()
            self._loop.add_reader(tree.fd, tree.on_readable)
            self._tree = tree
        except OSError as exc:  # no inotify here: watchdog's observer (or nothing) instead
            log.warning("inotify unavailable: %s", exc)
        for root in list(self._pending):
            self.watch(root)
        self._pending.clear()

    def _tree_notify(self, path: str, what: str = "", /) -> None:
        notify = self.notify_on_loop or self._notify
        if notify is not None:
            notify(path, what)

    def _start_observer(self) -> Any:
        from watchdog.observers import Observer

        # watchdog warns from its own thread when a re-created directory reuses an
        # inotify watch; that is expected under churn and harmless
        warnings.filterwarnings("ignore", message="Callback with id", category=RuntimeWarning)
        logging.getLogger(_WATCHDOG_LOGGER).addHandler(self._overflow)
        self._observer = Observer()
        self._observer.daemon = True
        self._observer.start()
        return self._observer

    def watch(self, root: str) -> None:
        if self._loop is None:
            self._pending.add(root)
            return
        if root in self._watches:
            return
        where, backed = self.watched_path(root)
        try:
            if self._tree is not None and not backed and fs_type(where) in LOCAL_FS:
                self._tree.add(root)
                self._watches[root] = _ON_LOOP
                self._walk(root)
            else:
                handler = _Handler(self, (where, root) if backed else None)
                observer = self._observer or self._start_observer()
                self._watches[root] = observer.schedule(handler, where, recursive=True)
            self.failed.pop(root, None)
        except OSError as exc:  # e.g. out of inotify watches: the sweep still works
            log.warning("cannot watch %s: %s", root, exc)
            self.failed[root] = str(exc)

    def unwatch(self, root: str) -> None:
        self._pending.discard(root)
        watch = self._watches.pop(root, None)
        self._complete.pop(root, None)
        if watch is _ON_LOOP and self._tree is not None:
            self._tree.remove(root)
        elif watch is not None and self._observer is not None:
            self._observer.unschedule(watch)

    def _walk(self, root: str) -> None:
        """Watch ``root``'s subdirectories on a worker thread; ``drain`` waits for it."""
        tree, loop = self._tree, self._loop
        assert tree is not None and loop is not None
        walk = loop.run_in_executor(None, tree.add_tree, root)
        self._walks[root] = walk

        def done(f: asyncio.Future[None]) -> None:
            if self._walks.get(root) is f:
                del self._walks[root]
            if not f.cancelled() and f.exception() is not None:
                log.warning("cannot watch under %s: %s", root, f.exception())
                tree.partial.add(root)

        walk.add_done_callback(done)

    async def ready(self, root: str) -> None:
        """Wait until every directory of ``root`` is watched (its first walk ended)."""
        walk = self._walks.get(root)
        if walk is not None:
            await asyncio.wait([walk])

    def drain(self, root: str) -> bool:
        """Notify every change made under ``root`` before this call, now, on the loop.

        False where that cannot be known without a cookie: a root watchdog
        follows (its threads may hold events) or one with an unwatched directory.
        """
        tree = self._tree
        if tree is None or self._watches.get(root) is not _ON_LOOP:
            return False
        if root in tree.partial or root in self._walks:  # not every directory watched yet
            return False
        tree.read()
        return True

    def watching(self, root: str) -> bool:
        return root in self._watches

    def deliver(self, event: Any, mapping: tuple[str, str] | None = None) -> None:
        if event.event_type in _IGNORED_EVENTS or self._notify is None:
            return
        is_dir = getattr(event, "is_directory", False)
        if event.event_type == "modified" and is_dir:
            return  # its entries changed: they come as their own events
        # a write, truncate or chmod of a file (IN_MODIFY, IN_CLOSE_WRITE, IN_ATTRIB)
        what = MODIFIED if event.event_type in _FILE_EVENTS and not is_dir else ""
        for raw in (event.src_path, getattr(event, "dest_path", "")):
            if not raw:
                continue
            path = _text(raw)
            if mapping is not None:  # a backing directory's event, under the root
                rel = _under(path, mapping[0])
                if rel is None:
                    continue
                path = os.path.join(mapping[1], rel) if rel else mapping[1]
            self._notify(path, what)

    async def aclose(self) -> None:
        logging.getLogger(_WATCHDOG_LOGGER).removeHandler(self._overflow)
        if self._tree is not None:
            if self._loop is not None and not self._loop.is_closed():
                self._loop.remove_reader(self._tree.fd)
            with self._tree.lock:
                self._tree.roots.clear()  # a walk under way stops
            if self._walks:
                await asyncio.wait(list(self._walks.values()))
            self._tree.close()
            self._tree = None
        self._loop = None
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(timeout=5)
            self._observer = None
        self._watches.clear()
        self._notify = None


_WATCHDOG_LOGGER = "watchdog.observers.inotify_c"
_ON_LOOP = object()  # the watch of a root ``InotifyTree`` follows


class _OverflowHandler(logging.Handler):
    """watchdog reports a kernel queue overflow only as a log record: turn it into a signal."""

    def __init__(self, source: WatchdogSource) -> None:
        super().__init__(logging.WARNING)
        self._source = source

    def emit(self, record: logging.LogRecord) -> None:
        if "overflow" in record.getMessage().lower():
            self._source.lost()


def _text(path: str | bytes) -> str:
    return path.decode("utf-8", "surrogateescape") if isinstance(path, bytes) else path


class _Handler:
    """The watchdog event handler protocol, forwarding to a ``WatchdogSource``."""

    def __init__(self, source: WatchdogSource, mapping: tuple[str, str] | None = None) -> None:
        self._source = source
        self._mapping = mapping

    def dispatch(self, event: Any) -> None:
        self._source.deliver(event, self._mapping)
