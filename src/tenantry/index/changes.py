"""Change sources: who tells the index that a path may have changed.

The index keeps itself fresh from three signals: the gateway's own
``command.finished`` events, a periodic sweep that stats directories only, and
a **change source** — something that learns about changes as they happen. On a
local file system that is inotify (``WatchdogSource``); on Lustre it would be
the MDT changelog. A change source implements ``ChangeSource``:

``watch(root)`` / ``unwatch(root)``
    start and stop following one workspace (an absolute directory).
``start(notify)``
    begin delivering. ``notify(path)`` is thread-safe and takes an absolute
    path that may have been created, modified, deleted, or renamed (call it
    for both ends of a rename). It is a hint: the index re-lists the path's
    parent directory and compares stats, so spurious or duplicate calls cost
    one directory scan and never corrupt anything; coalescing happens in the index.
``aclose()``
    stop and release everything.

A Lustre adapter would register a changelog user (``lctl changelog_register``),
read records with ``lfs changelog MDT [startrec]``, turn each record's parent
FID and name into a path (``lfs fid2path``; records of type CREAT, MKDIR,
UNLNK, RMDIR, RENME, RNMTO, CLOSE, MTIME, SATTR, TRUNC), call ``notify`` for
paths under a watched root, and acknowledge with ``lfs changelog_clear``. No
Lustre is available here, so only the interface and the inotify source ship.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable
from typing import Any, Protocol

log = logging.getLogger(__name__)

Notify = Callable[[str], None]


class ChangeSource(Protocol):
    def watch(self, root: str) -> None: ...

    def unwatch(self, root: str) -> None: ...

    async def start(self, notify: Notify) -> None: ...

    async def aclose(self) -> None: ...


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

    def changed(self, path: str) -> None:
        if self._notify is not None:
            self._notify(path)

    async def aclose(self) -> None:
        self._notify = None


# inotify reports our own reads (open, close-without-write): never react to them
_IGNORED_EVENTS = frozenset({"opened", "closed_no_write"})


class WatchdogSource:
    """inotify (through ``watchdog``): changes arrive within milliseconds."""

    def __init__(self) -> None:
        self._observer: Any = None
        self._watches: dict[str, Any] = {}
        self._pending: set[str] = set()
        self._notify: Notify | None = None
        self.failed: dict[str, str] = {}

    async def start(self, notify: Notify) -> None:
        from watchdog.observers import Observer

        # watchdog warns from its own thread when a re-created directory reuses an
        # inotify watch; that is expected under churn and harmless
        warnings.filterwarnings("ignore", message="Callback with id", category=RuntimeWarning)
        self._notify = notify
        self._observer = Observer()
        self._observer.daemon = True
        self._observer.start()
        for root in list(self._pending):
            self.watch(root)
        self._pending.clear()

    def watch(self, root: str) -> None:
        if self._observer is None:
            self._pending.add(root)
            return
        if root in self._watches:
            return
        try:
            self._watches[root] = self._observer.schedule(_Handler(self), root, recursive=True)
            self.failed.pop(root, None)
        except OSError as exc:  # e.g. out of inotify watches: the sweep still works
            log.warning("cannot watch %s: %s", root, exc)
            self.failed[root] = str(exc)

    def unwatch(self, root: str) -> None:
        self._pending.discard(root)
        watch = self._watches.pop(root, None)
        if watch is not None and self._observer is not None:
            self._observer.unschedule(watch)

    def watching(self, root: str) -> bool:
        return root in self._watches

    def deliver(self, event: Any) -> None:
        if event.event_type in _IGNORED_EVENTS or self._notify is None:
            return
        self._notify(_text(event.src_path))
        dest = getattr(event, "dest_path", "")
        if dest:
            self._notify(_text(dest))

    async def aclose(self) -> None:
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(timeout=5)
            self._observer = None
        self._watches.clear()
        self._notify = None


def _text(path: str | bytes) -> str:
    return path.decode("utf-8", "surrogateescape") if isinstance(path, bytes) else path


class _Handler:
    """The watchdog event handler protocol, forwarding to a ``WatchdogSource``."""

    def __init__(self, source: WatchdogSource) -> None:
        self._source = source

    def dispatch(self, event: Any) -> None:
        self._source.deliver(event)
