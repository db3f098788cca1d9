"""``IndexService``: the workspace index as a daemon component.

It owns ``<state>/index.sqlite3``, a thread pool for file-system reads, a change
source (inotify by default) and a sweep loop, and it listens for the gateway's
``command.finished`` events. Queries read only the database; the file system is
touched to build and refresh the index, and by ``verify`` for the paths a query
returns.

Refreshing is one operation, ``sync(workspace, dir)``: stat and list one
directory, compare with the index, write the difference in one transaction,
and recurse into new subdirectories (or all of them when ``deep``). The first
crawl is a deep sync of the root; every freshness signal ends in shallow syncs
of the directories it names.
"""

# (hot paths: plain string paths and os calls, no Path object per file)
from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
import logging
import os
import stat as stat_mod
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from tenantry.core.errors import Conflict, IndexError_, NotFound, UsageError
from tenantry.core.events import Event, EventType, Subscription
from tenantry.core.tasks import TaskGroup
from tenantry.index import crawl, query, store
from tenantry.index.changes import (
    MODIFIED,
    ChangeSource,
    ManualSource,
    WatchdogSource,
    parse_backing,
)
from tenantry.index.gitstatus import GitRun, GitStatus
from tenantry.index.ignore import ALWAYS_SKIPPED, IGNORE_FILES, Rules, is_ignored
from tenantry.service.runtime import Runtime
from tenantry.store.engine import Schema
from tenantry.store.sqlite import SQLiteStore

log = logging.getLogger(__name__)
T = TypeVar("T")

DEBOUNCE_S = 0.05
COMPLETE_SWEEP_EVERY = 10  # sweeps of a root whose change source is complete: 1 in 10
WORKERS = 8


# SQLite only: FTS5 trigram tables
SCHEMA = Schema("index", __package__ or "tenantry.index", engines=("sqlite",))


@dataclass(slots=True)
class Workspace:
    id: int
    root: str
    state: str = "ready"  # crawling | ready | error
    error: str = ""
    crawled_at: float | None = None
    swept_at: float | None = None
    rules: dict[str, Rules | None] = field(default_factory=dict)
    crawl: asyncio.Task[None] | None = None
    # refreshes after gateway commands and change notifications: queries wait for
    # them, commands do not
    inflight: set[asyncio.Task[None]] = field(default_factory=set)


@dataclass(slots=True)
class Counters:
    fs_ops: int = 0
    syncs: int = 0
    file_refreshes: int = 0
    barriers: int = 0
    drains: int = 0
    sweeps: int = 0
    sweep_rounds: int = 0
    notifications: int = 0


class IndexService:
    def __init__(
        self,
        runtime: Runtime,
        *,
        source: ChangeSource | None = None,
        path: str | None = None,
    ) -> None:
        s = runtime.settings
        self.runtime = runtime
        # a file of its own, apart from the daemon's store: see bench/store_one_db.md
        self.db = SQLiteStore(path or str(s.state_path / "index.sqlite3"), [SCHEMA], readers=2)
        self.sweep_s = float(s.index_sweep_s)
        self.max_bytes = int(s.index_max_file_bytes)
        self.source: ChangeSource = source or (
            WatchdogSource(parse_backing(s.index_watch_backing))
            if s.index_watch
            else ManualSource()
        )
        self.git = GitStatus(str(s.state_path))
        if isinstance(self.source, WatchdogSource):
            self.source.on_lost = self._lost_threadsafe
            self.source.notify_on_loop = self.notify
        self.counters = Counters()
        self.workspaces: dict[int, Workspace] = {}
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._locks: dict[tuple[int, str], tuple[asyncio.Lock, int]] = {}
        # directories to re-list, each with the children to re-list deep (a change
        # inside a directory the index has not listed yet: that subtree is new)
        self._pending: dict[tuple[int, str], set[str]] = {}
        self._pending_files: set[tuple[int, str]] = set()  # files to re-read alone
        self._flush: asyncio.TimerHandle | None = None
        self._timers: set[asyncio.TimerHandle] = set()
        self._file_rechecks: dict[tuple[int, str], asyncio.TimerHandle] = {}
        self._tasks = TaskGroup("index")  # failures logged and shown in info
        self._loop: asyncio.AbstractEventLoop | None = None
        self._subscription = Subscription()
        self._sweeper: asyncio.Task[None] | None = None

    # --- lifecycle -------------------------------------------------------

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._pool = concurrent.futures.ThreadPoolExecutor(WORKERS, thread_name_prefix="index")
        await self.db.start()
        for row in await self.db.fetchall("SELECT id, root, crawled_at, swept_at FROM workspaces"):
            ws = Workspace(row[0], row[1], crawled_at=row[2], swept_at=row[3])
            self.workspaces[ws.id] = ws
            self.source.watch(ws.root)
        await self.source.start(self._notify_threadsafe)
        self._subscription.open(self.runtime.bus, self._on_event)
        for ws in self.workspaces.values():
            # catch what changed while the daemon was down: every file is stat'ed,
            # only changed ones are read
            ws.state = "crawling"
            ws.crawl = self._spawn(self._crawl(ws, purge=True))
        if self.sweep_s > 0:
            self._sweeper = asyncio.create_task(self._sweep_loop())

    async def aclose(self) -> None:
        self._subscription.close()
        if self._flush is not None:
            self._flush.cancel()
        for handle in self._timers:
            handle.cancel()
        self._timers.clear()
        self._file_rechecks.clear()
        await self.source.aclose()
        tasks = [t for t in [self._sweeper, *self._tasks] if t is not None]
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        await self.db.aclose()

    def _spawn(self, coro: Awaitable[T]) -> asyncio.Task[T]:
        return self._tasks.spawn(coro)

    async def _io(self, fn: Callable[..., T], *args: Any) -> T:
        assert self._pool is not None
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    # --- workspaces ------------------------------------------------------

    async def add(self, path: str, *, wait: bool = False) -> dict[str, Any]:
        root = await self._io(os.path.realpath, _absolute(path))
        try:
            st = await self._io(os.stat, root)
        except OSError as exc:
            raise NotFound(f"cannot index {root}: {exc.strerror}") from exc
        if not stat_mod.S_ISDIR(st.st_mode):
            raise UsageError(f"{root} is not a directory", hint="index a workspace directory")
        for ws in self.workspaces.values():
            if ws.root == root:
                if wait and ws.crawl is not None:
                    await asyncio.shield(ws.crawl)
                return self.describe(ws)
            if root.startswith(ws.root + "/") or ws.root.startswith(root + "/"):
                raise Conflict(
                    f"{root} overlaps the indexed workspace {ws.root}",
                    hint="index the outer directory once, or remove the other first",
                )
        ws_id = await self.db.write(
            lambda c: store.add_workspace(c, root, st.st_mode, st.st_mtime_ns)
        )
        ws = Workspace(ws_id, root, state="crawling")
        self.workspaces[ws_id] = ws
        self.source.watch(root)
        ws.crawl = self._spawn(self._crawl(ws))
        if wait:
            await asyncio.shield(ws.crawl)
        return self.describe(ws)

    async def remove(self, path: str) -> dict[str, Any]:
        scope = self.resolve(path)
        ws = self.workspaces[scope.ws]
        if scope.rel:
            raise UsageError(f"{path} is inside workspace {ws.root}", hint="remove the root")
        if ws.crawl is not None:
            ws.crawl.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await ws.crawl
        self.source.unwatch(ws.root)
        self.git.forget(ws.id)
        del self.workspaces[ws.id]
        await self.db.write(lambda c: store.remove_workspace(c, ws.id))
        return {"root": ws.root, "removed": True}

    async def describe_all(self) -> list[dict[str, Any]]:
        counts = {
            r[0]: (r[1], r[2], r[3])
            for r in await self.db.fetchall(
                "SELECT ws, count(*), sum(text = 1), coalesce(sum(CASE WHEN kind = 'f'"
                " THEN size END), 0) FROM entries GROUP BY ws"
            )
        }
        out = []
        for ws in self.workspaces.values():
            d = self.describe(ws)
            n, texts, size = counts.get(ws.id, (0, 0, 0))
            d.update(entries=n, text_files=texts, bytes=size)
            out.append(d)
        return out

    def describe(self, ws: Workspace) -> dict[str, Any]:
        watching = getattr(self.source, "watching", None)
        return {
            "root": ws.root,
            "state": ws.state,
            "error": ws.error,
            "crawled_at": ws.crawled_at,
            "swept_at": ws.swept_at,
            "watching": bool(watching(ws.root))
            if watching
            else ws.root in getattr(self.source, "roots", ()),
        }

    async def footprint(self) -> dict[str, Any]:
        """Bytes on disk per entry and content bytes vs indexed text (dbstat)."""

        def fn(conn: Any) -> dict[str, Any]:
            try:
                sizes = dict(
                    conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name").fetchall()
                )
            except Exception:  # dbstat not compiled in
                return {}
            entries = conn.execute("SELECT count(*) FROM entries").fetchone()[0]
            text = conn.execute(
                "SELECT coalesce(sum(size), 0) FROM entries WHERE text = 1"
            ).fetchone()[0]
            path_bytes = sum(
                v for k, v in sizes.items() if k == "entries" or k.startswith("entries_")
            )
            content_bytes = sum(v for k, v in sizes.items() if k == "content" or "grams" in k)
            return {
                "entries": entries,
                "path_bytes_per_entry": round(path_bytes / entries, 1) if entries else None,
                "text_bytes": text,
                "content_bytes": content_bytes,
                "content_ratio": round(content_bytes / text, 3) if text else None,
                "tables": sizes,
            }

        return await self.db.read(fn)

    # --- resolving paths -------------------------------------------------

    def resolve(self, path: str) -> query.Scope:
        """The workspace and relative path of an absolute ``path`` (no file-system access)."""
        norm = _absolute(path)
        scope = self._match(norm)
        if scope is None:
            scope = self._match(os.path.realpath(norm))  # a symlinked spelling: costs stats
        if scope is None:
            raise NotFound(
                f"{norm} is not in an indexed workspace",
                hint=f"register it with `tenantry index add {norm}`",
            )
        return scope

    def _match(self, norm: str) -> query.Scope | None:
        best: Workspace | None = None
        for ws in self.workspaces.values():
            if (norm == ws.root or norm.startswith(ws.root.rstrip("/") + "/")) and (
                best is None or len(ws.root) > len(best.root)
            ):
                best = ws
        if best is None:
            return None
        rel = "" if norm == best.root else norm[len(best.root.rstrip("/")) + 1 :]
        return query.Scope(best.id, best.root, rel)

    def state_of(self, scope: query.Scope) -> dict[str, Any]:
        ws = self.workspaces[scope.ws]
        return {"workspace": ws.root, "state": ws.state, "swept_at": ws.swept_at}

    async def read(self, fn: Callable[[Any], T]) -> T:
        return await self.db.read(fn)

    # --- refreshing ------------------------------------------------------

    async def _crawl(self, ws: Workspace, *, purge: bool = False) -> None:
        try:
            if purge:  # credentials' text an older crawl kept (core.secrets)
                await self.db.write(lambda c: store.purge_secrets(c, ws.id, ws.root))
            await self.sync(ws.id, "", deep=True)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("crawl of %s failed", ws.root)
            ws.state, ws.error = "error", str(exc)
            return
        ready = getattr(self.source, "ready", None)
        if ready is not None:  # every directory watched: queries can drain the source
            await ready(ws.root)
        ws.state, ws.error = "ready", ""
        ws.crawled_at = time.time()
        ts = ws.crawled_at
        await self.db.execute("UPDATE workspaces SET crawled_at = ? WHERE id = ?", (ts, ws.id))
        await self._quiet(self._prime_git(ws))

    async def _prime_git(self, ws: Workspace) -> None:
        """A repository's first two ``git status`` check every file: run them with the crawl.

        The first (the trivial fsmonitor answer) stores the token; git marks the
        entries valid for the fsmonitor only in the run after, which lstats every
        tracked file once more. From the third on, git checks what the feed reported.
        """
        if self.git_offload(ws.root)[0] is None:
            return
        if await self._io(os.path.isdir, os.path.join(ws.root, ".git")):
            for _ in range(2):
                await self.git_status(ws, ["--porcelain"])

    async def wait_ready(self, path: str) -> None:
        ws = self.workspaces[self.resolve(path).ws]
        if ws.crawl is not None:
            await asyncio.shield(ws.crawl)

    @contextlib.asynccontextmanager
    async def _lock(self, ws: int, rel: str) -> AsyncIterator[None]:
        """One sync per directory at a time (entries are written by their parent's sync)."""
        key = (ws, rel)
        lock, users = self._locks.get(key, (asyncio.Lock(), 0))
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[key]
            if users <= 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)

    async def sync(
        self,
        ws_id: int,
        rel: str,
        *,
        deep: bool = False,
        force: frozenset[str] = frozenset(),
        dir_id: int | None = None,
        descend: frozenset[str] = frozenset(),
    ) -> None:
        """Make the index match directory ``rel`` (and its subtree when ``deep``).

        ``force``: names whose text is read even if their stat did not move;
        ``descend``: subdirectories synced deep although already known.
        """
        ws = self.workspaces.get(ws_id)
        if ws is None:
            return
        async with self._lock(ws_id, rel):
            if dir_id is None:
                row = await self.db.fetchone(
                    "SELECT id, kind FROM entries WHERE ws = ? AND path = ?", (ws_id, rel)
                )
                if row is None or row[1] != "d":
                    return
                dir_id = int(row[0])
            known = {
                r[0]: crawl.Known(r[1], r[2], r[3], r[4], r[5])
                for r in await self.db.fetchall(
                    "SELECT substr(path, base), id, kind, size, mtime_ns, mode FROM entries"
                    " WHERE parent = ?",
                    (dir_id,),
                )
            }
            chain = await self._chain(ws, rel)
            scan = await self._io(crawl.scan_dir, ws.root, rel, chain, known, self.max_bytes, force)
            self.counters.fs_ops += scan.stats
            self.counters.syncs += 1
            if _rules_changed(known, scan):
                deep = True
            ws.rules[rel] = scan.rules
            children = await self.db.write(lambda c: store.apply_scan(c, ws_id, dir_id, scan))
            if not scan.exists:
                for key in [k for k in ws.rules if k == rel or k.startswith(rel + "/")]:
                    ws.rules.pop(key, None)
        racy = frozenset(f.name for f in scan.found if f.racy)
        if scan.exists and (scan.racy or racy):
            self._recheck(ws_id, rel, racy)
        if children:
            await asyncio.gather(
                *(
                    self.sync(
                        ws_id,
                        crawl.join(rel, c.name),
                        deep=deep or c.new or c.name in descend,
                        dir_id=c.id,
                    )
                    for c in children
                    if c.new or deep or c.name in descend
                )
            )

    async def _chain(self, ws: Workspace, rel: str) -> list[Rules]:
        """Ignore rules of ``rel``'s ancestors (cached; read from disk when missing)."""
        chain: list[Rules] = []
        if not rel:
            return chain
        parts = rel.split("/")
        for i in range(len(parts)):
            anc = "/".join(parts[:i])
            if anc not in ws.rules:
                ws.rules[anc] = await self._io(crawl.load_rules, ws.root, anc)
                self.counters.fs_ops += len(IGNORE_FILES)
            rules = ws.rules[anc]
            if rules is not None:
                chain.append(rules)
        return chain

    def _recheck(self, ws_id: int, rel: str, force: frozenset[str]) -> None:
        """Sync again once timestamps are old enough to trust (the racy-git problem)."""
        assert self._loop is not None

        def fire() -> None:
            self._timers.discard(handle)
            self._spawn(self._quiet(self.sync(ws_id, rel, force=force)))

        handle = self._loop.call_later(crawl.RACY_S + 0.1, fire)
        self._timers.add(handle)

    async def _quiet(self, aw: Awaitable[Any]) -> None:
        try:
            await aw
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("index refresh failed")

    # --- freshness signals ----------------------------------------------

    def _notify_threadsafe(self, path: str, what: str = "") -> None:
        self._on_loop(self.notify, path, what)

    def _lost_threadsafe(self, root: str) -> None:
        self._on_loop(self.lost, root)

    def _on_loop(self, fn: Callable[..., None], *args: str) -> None:
        """Call ``fn(*args)`` on the event loop (from the change source's thread)."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(fn, *args)

    def lost(self, root: str) -> None:
        """The change source dropped events under ``root``: git status checks everything."""
        scope = self._match(root)
        if scope is not None:
            self.git.repo(scope.ws).journal.lose()

    def notify(self, path: str, what: str = "") -> None:
        """``path`` (absolute) may have changed: refresh it soon (coalesced).

        ``what=MODIFIED`` (only that file's contents or attributes changed): re-read
        the file alone; otherwise re-list its parent directory.
        """
        self.counters.notifications += 1
        scope = self._match(os.path.normpath(path))
        if scope is None or not scope.rel:
            return
        if self.git.record(scope.ws, scope.rel):
            return  # a cookie: never indexed
        ws = self.workspaces[scope.ws]
        target = self._dir_to_sync(ws, scope.rel)
        if target is None:
            return
        parent, _, name = scope.rel.rpartition("/")
        if what == MODIFIED and target == parent and name not in IGNORE_FILES:
            self._pending_files.add((ws.id, scope.rel))
        else:
            descend = self._pending.setdefault((ws.id, target), set())
            if target != parent:
                # a listing of that directory may be under way and miss this change
                descend.add(scope.rel[len(target) + 1 if target else 0 :].split("/")[0])
        if self._flush is None and self._loop is not None:
            self._flush = self._loop.call_later(DEBOUNCE_S, self._flush_pending)

    def _dir_to_sync(self, ws: Workspace, rel: str) -> str | None:
        """The directory to re-list for a change at ``rel``; None if ``rel`` is ignored.

        That is the deepest directory on the path the index has listed, unless the
        next component down is a directory the ignore rules exclude.
        """
        parts = rel.split("/")
        depth = len(parts) - 1
        while depth > 0 and "/".join(parts[:depth]) not in ws.rules:
            depth -= 1
        anc = "/".join(parts[:depth])
        if depth < len(parts) - 1:  # the change is inside a directory the index lacks
            child = parts[depth]
            if child in ALWAYS_SKIPPED:
                return None
            chain = [r for a, r in ws.rules.items() if r is not None and _is_anc(a, anc)]
            chain.sort(key=lambda r: len(r.base))
            if is_ignored(chain, crawl.join(anc, child), True):
                return None
        return anc

    def _flush_pending(self) -> None:
        if self._flush is not None:
            self._flush.cancel()
            self._flush = None
        dirs, self._pending = self._pending, {}
        files, self._pending_files = self._pending_files, set()
        force: dict[tuple[int, str], set[str]] = {}
        for ws_id, rel in sorted(files):
            parent, _, name = rel.rpartition("/")
            if (ws_id, parent) in dirs:  # re-listed anyway: read the file there
                force.setdefault((ws_id, parent), set()).add(name)
            else:
                self._refresh_task(ws_id, self.refresh_file(ws_id, rel))
        for (ws_id, rel), descend in dirs.items():
            names = frozenset(force.get((ws_id, rel), ()))
            sync = self.sync(ws_id, rel, force=names, descend=frozenset(descend))
            self._refresh_task(ws_id, sync)

    def _refresh_task(self, ws_id: int, aw: Awaitable[None]) -> None:
        """Run a refresh of workspace ``ws_id``; its queries wait for it (``wait_fresh``)."""
        task = self._spawn(self._quiet(aw))
        ws = self.workspaces.get(ws_id)
        if ws is not None:
            ws.inflight.add(task)
            task.add_done_callback(ws.inflight.discard)

    async def refresh_file(self, ws_id: int, rel: str, *, recheck: bool = False) -> None:
        """Re-read one file the change source named, without listing its directory.

        A file the index lacks, or one that is gone or no longer a regular file, is
        looked up in its directory instead (a sync of the parent). ``recheck``: stat
        it and read it again only if its stat moved.
        """
        ws = self.workspaces.get(ws_id)
        if ws is None:
            return
        parent, _, name = rel.rpartition("/")
        done = False
        found: crawl.Found | None = None
        async with self._lock(ws_id, parent):  # the parent's sync writes this row too
            row = await self.db.fetchone(
                "SELECT id, kind, size, mtime_ns, mode FROM entries WHERE ws = ? AND path = ?",
                (ws_id, rel),
            )
            if row is not None and row[1] == "f":
                known = crawl.Known(row[0], row[1], row[2], row[3], row[4])
                found, ops = await self._io(
                    crawl.scan_file, ws.root, rel, self.max_bytes, known if recheck else None
                )
                self.counters.fs_ops += ops
                self.counters.file_refreshes += 1
                if found is not None:
                    f = found
                    done = await self.db.write(lambda c: store.apply_file(c, ws_id, known.id, f))
        if not done:
            await self.sync(ws_id, parent, force=frozenset({name}))
            return
        if found is not None:
            self._recheck_file(ws, rel, racy=found.racy, again=recheck)

    def _recheck_file(self, ws: Workspace, rel: str, *, racy: bool, again: bool) -> None:
        """Check a refreshed file once more, later, where its read may not be the last word.

        Where the change source sees every change through the file system the index
        reads, never: a later change, even in the same clock tick, is its own event.
        Where it watches a backing tree, the mount's client caches may have served
        the read before the change reached them (a stale stat and text that agree,
        with an old mtime): the stat is checked once more after the caches' usual
        lifetime, whatever the mtime said. With an incomplete source, a file whose
        mtime is too fresh to trust (``racy``) is read again.
        """
        complete = getattr(self.source, "complete", None)
        backed = getattr(self.source, "backed", None)
        is_complete = complete is not None and complete(ws.root)
        is_backed = backed is not None and bool(backed(ws.root))
        if is_complete and not is_backed:
            return
        if not racy and (again or not is_backed):
            return
        assert self._loop is not None
        ws_id = ws.id
        key = (ws_id, rel)
        earlier = self._file_rechecks.pop(key, None)
        if earlier is not None:  # a burst of edits of one file: one re-check, after the last
            earlier.cancel()
            self._timers.discard(earlier)

        def fire() -> None:
            self._timers.discard(handle)
            self._file_rechecks.pop(key, None)
            self._refresh_task(ws_id, self.refresh_file(ws_id, rel, recheck=is_complete))

        handle = self._loop.call_later(crawl.RACY_S + 0.1, fire)
        self._timers.add(handle)
        self._file_rechecks[key] = handle

    async def _on_event(self, event: Event) -> None:
        if event.type is not EventType.COMMAND_FINISHED:
            return
        cwd = event.data.get("cwd")
        if not isinstance(cwd, str) or not os.path.isabs(cwd):
            return
        scope = self._match(os.path.normpath(cwd))
        if scope is None:
            return
        ws = self.workspaces[scope.ws]
        if self._cookie_dir(ws) is not None:
            return  # the change source reports what the command changed; queries barrier
        self._refresh_task(ws.id, self.refresh(cwd))

    def _cookie_dir(self, ws: Workspace) -> str | None:
        """Where a cookie flushes the change source of ``ws``, if it sees every change."""
        complete = getattr(self.source, "complete", None)
        cookie_dir = getattr(self.source, "cookie_dir", None)
        if complete is None or cookie_dir is None or not complete(ws.root):
            return None
        return str(cookie_dir(ws.root))

    async def wait_fresh(self, scope: query.Scope, timeout: float = 60.0) -> None:
        """Wait until the index holds every change made before this call (queries).

        Where the change source sees every change, it is first made to deliver
        everything made before this call: by draining it on the loop where it can
        (``drain(root)``: an inotify descriptor read until it would block), else
        by a cookie file created and removed in the watched tree, waiting until
        the source reports it (the source delivers in order, so every earlier
        change has been notified by then). The refreshes those notifications
        asked for run at once (no coalescing delay) and are awaited. Elsewhere
        (no complete source) it waits for the refreshes already running, such
        as the one after a gateway command.
        """
        ws = self.workspaces.get(scope.ws)
        if ws is None:
            return
        cookie_dir = self._cookie_dir(ws)
        if cookie_dir is not None:
            drain = getattr(self.source, "drain", None)
            if drain is not None and drain(ws.root):
                self.counters.drains += 1
            else:
                self.counters.barriers += 1
                await self.git.barrier(cookie_dir)  # False after 5 s: answer what we have
            if self._pending or self._pending_files:
                self._flush_pending()
        if ws.inflight:
            await asyncio.wait(list(ws.inflight), timeout=timeout)

    async def refresh(self, path: str) -> None:
        """Re-stat everything under ``path`` now (after a command ran there)."""
        scope = self._match(_absolute(path))
        if scope is None:
            return
        # a command may have edited files in place: compare every file's stat
        rel = scope.rel
        row = await self.db.fetchone(
            "SELECT kind FROM entries WHERE ws = ? AND path = ?", (scope.ws, rel)
        )
        if row is None or row[0] != "d":
            rel = rel.rsplit("/", 1)[0] if "/" in rel else ""
        await self.sync(scope.ws, rel, deep=True)

    async def _sweep_loop(self) -> None:
        complete = getattr(self.source, "complete", None)
        for n in itertools.count(1):
            await asyncio.sleep(self.sweep_s)
            self.counters.sweep_rounds = n
            for ws in list(self.workspaces.values()):
                if ws.state == "crawling":
                    continue
                # where the change source sees every change the sweep is only a safety
                # net (events lost unnoticed): run it a tenth as often there
                if complete is not None and complete(ws.root) and n % COMPLETE_SWEEP_EVERY:
                    continue
                await self._quiet(self.sweep(ws.id))

    async def sweep(self, ws_id: int) -> int:
        """Stat every indexed directory; re-list those whose mtime moved. Returns how many."""
        ws = self.workspaces[ws_id]
        dirs = await self.db.fetchall(
            "SELECT path, mtime_ns FROM entries WHERE ws = ? AND kind = 'd'", (ws_id,)
        )
        pairs = [(r[0], r[1]) for r in dirs]
        step = max(64, len(pairs) // WORKERS + 1)
        parts = await asyncio.gather(
            *(
                self._io(crawl.changed_dirs, ws.root, pairs[i : i + step])
                for i in range(0, len(pairs), step)
            )
        )
        changed = sorted({rel for part in parts for rel in part})
        self.counters.fs_ops += len(dirs)
        self.counters.sweeps += 1
        await asyncio.gather(*(self._quiet(self.sync(ws_id, rel)) for rel in changed))
        ws.swept_at = time.time()
        await self.db.execute(
            "UPDATE workspaces SET swept_at = ? WHERE id = ?", (ws.swept_at, ws_id)
        )
        return len(changed)

    async def verify(self, scope: query.Scope, paths: list[str]) -> int:
        """Re-stat ``paths`` (absolute, from a result); refresh those that changed."""
        rels = []
        for p in paths:
            s = self._match(p)
            if s is not None and s.ws == scope.ws:
                rels.append(s.rel)
        if not rels:
            return 0
        marks = ",".join("?" * len(rels))
        rows = await self.db.fetchall(
            f"SELECT path, kind, size, mtime_ns FROM entries WHERE ws = ? AND path IN ({marks})",
            (scope.ws, *rels),
        )
        ws = self.workspaces[scope.ws]
        stale = await self._io(crawl.stale_paths, ws.root, [tuple(r) for r in rows])
        self.counters.fs_ops += len(rows)
        # paths the index lacks may have appeared since: re-list their directories
        absent = set(rels) - {r[0] for r in rows}
        if absent:
            present = await self._io(crawl.existing_paths, ws.root, sorted(absent))
            self.counters.fs_ops += len(absent)
            stale += present
        syncs: dict[str, set[str]] = {}
        kinds = {r[0]: r[1] for r in rows}
        for rel in stale:
            if kinds.get(rel) == "d":
                syncs.setdefault(rel, set())
            if rel:
                parent, _, name = rel.rpartition("/")
                syncs.setdefault(parent, set()).add(name)
        await asyncio.gather(
            *(self.sync(scope.ws, p, force=frozenset(n)) for p, n in syncs.items())
        )
        return len(stale)

    # --- git status from the change feed --------------------------------

    def git_offload(self, path: str) -> tuple[Workspace | None, str]:
        """The workspace whose ``git status`` Tenantry may answer at ``path``, or why not."""
        scope = self._match(_absolute(path))
        if scope is None:
            return None, "not in an indexed workspace"
        ws = self.workspaces[scope.ws]
        complete = getattr(self.source, "complete", None)
        if scope.rel:
            return None, "not the workspace root"
        if complete is None or not complete(ws.root):
            return None, "the change source does not see every change here"
        return ws, ""

    async def git_status(self, ws: Workspace, args: list[str]) -> tuple[GitRun, bool]:
        """``git status ARGS`` at ``ws``'s root through the change feed; (run, synced)."""
        repo = self.git.repo(ws.id)
        async with repo.lock:
            cookie_dir = getattr(self.source, "cookie_dir", None)
            synced = False
            if cookie_dir is not None:
                synced = await self.git.barrier(cookie_dir(ws.root))
            return await self.git.run(repo, ws.root, args, synced), synced

    def status(self) -> dict[str, Any]:
        c = self.counters
        return {
            "fs_ops": c.fs_ops,
            "syncs": c.syncs,
            "sweeps": c.sweeps,
            "notifications": c.notifications,
            "file_refreshes": c.file_refreshes,
            "barriers": c.barriers,
            "drains": c.drains,
            "pending": len(self._pending) + len(self._pending_files) + len(self._tasks),
        }

    async def settle(self) -> None:
        """Wait until no refresh is queued or running (tests, benchmarks)."""
        while self._pending or self._pending_files or self._flush is not None or self._tasks:
            tasks = list(self._tasks)
            if tasks:
                await asyncio.wait(tasks)
            else:
                await asyncio.sleep(DEBOUNCE_S)


def _is_anc(a: str, rel: str) -> bool:
    return a == "" or a == rel or rel.startswith(a + "/")


def _rules_changed(known: dict[str, crawl.Known], scan: crawl.DirScan) -> bool:
    found = {f.name: f for f in scan.found if f.name in IGNORE_FILES}
    for name in IGNORE_FILES:
        old, new = known.get(name), found.get(name)
        if (old is None) != (new is None):
            return True
        if old and new and (old.size, old.mtime_ns) != (new.size, new.mtime_ns):
            return True
    return False


def _absolute(path: str) -> str:
    if not path or not os.path.isabs(path):
        raise UsageError(
            f"path {path!r} must be absolute", hint="the daemon does not know your cwd"
        )
    return os.path.normpath(path)


def create(runtime: Runtime) -> IndexService:
    return IndexService(runtime)


__all__ = ["IndexError_", "IndexService", "Workspace", "create"]
