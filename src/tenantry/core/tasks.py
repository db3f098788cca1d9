"""Named background tasks that never fail silently.

Every fire-and-forget task of the daemon goes through a ``TaskGroup``: a
task that raises has its traceback logged and is remembered, so
``facility.info`` (``tenantry info``) shows its component as unhealthy; a
long-lived loop started with ``supervise`` is restarted after a failure
(with a growing pause), since a dead status poller or scheduler would
otherwise leave jobs stuck without a word.
"""

from __future__ import annotations

import asyncio
import logging
import time
import traceback
import weakref
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from tenantry.core.errors import TenantryError

log = logging.getLogger(__name__)
T = TypeVar("T")

RESTART_MIN_S = 0.5
RESTART_MAX_S = 30.0
RECANCEL_S = 1.0  # a task that let a cancellation pass is cancelled again after this
CLOSE_GIVE_UP_S = 10.0  # a task still running this long after close is left behind
_KEEP_FAILURES = 20
_GROUPS: weakref.WeakSet[TaskGroup] = weakref.WeakSet()


@dataclass(frozen=True, slots=True)
class TaskFailure:
    task: str
    at: float
    error: str
    traceback: str

    def to_dict(self) -> dict[str, Any]:
        return {"task": self.task, "at": self.at, "error": self.error}


class TaskGroup:
    """The background tasks of one component (iterable over the live tasks)."""

    def __init__(self, component: str) -> None:
        self.component = component
        self._tasks: set[asyncio.Task[Any]] = set()
        self.failures: list[TaskFailure] = []
        self.restarts: Counter[str] = Counter()
        self._supervised: dict[str, str] = {}  # name -> "running" | "stopped"
        _GROUPS.add(self)

    def __iter__(self) -> Iterator[asyncio.Task[Any]]:
        return iter(list(self._tasks))

    def __len__(self) -> int:
        return len(self._tasks)

    def spawn(self, coro: Awaitable[T], name: str = "") -> asyncio.Task[T]:
        """Run ``coro`` in the background; a failure is logged and recorded."""
        task: asyncio.Task[T] = asyncio.ensure_future(coro)
        label = name or getattr(coro, "__qualname__", "task")
        task.set_name(f"{self.component}:{label}")
        self._tasks.add(task)
        task.add_done_callback(lambda t: self._done(t, label))
        return task

    def adopt(self, task: asyncio.Task[Any], name: str = "") -> None:
        """Track a task created elsewhere (e.g. a server's connection handler)."""
        label = name or task.get_name()
        self._tasks.add(task)
        task.add_done_callback(lambda t: self._done(t, label))

    def supervise(
        self, name: str, loop: Callable[[], Awaitable[None]], *, restart: bool = True
    ) -> asyncio.Task[None]:
        """Run a long-lived ``loop()``; restart it after a failure when ``restart``."""
        return self.spawn(self._keep(name, loop, restart), name)

    async def _keep(self, name: str, loop: Callable[[], Awaitable[None]], restart: bool) -> None:
        pause = RESTART_MIN_S
        self._supervised[name] = "running"
        while True:
            try:
                await loop()
                self._supervised[name] = "stopped"
                return
            except asyncio.CancelledError:
                self._supervised[name] = "stopped"
                raise
            except Exception as exc:
                self._record(name, exc)
                if not restart:
                    self._supervised[name] = "failed"
                    return
                self.restarts[name] += 1
                log.warning("%s: restarting %s in %.1f s", self.component, name, pause)
                await asyncio.sleep(pause)
                pause = min(pause * 2, RESTART_MAX_S)

    def _done(self, task: asyncio.Task[Any], name: str) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            self._record(name, exc)

    def _record(self, name: str, exc: BaseException) -> None:
        tb = "".join(traceback.format_exception(exc))
        log.error("%s: background task %s failed:\n%s", self.component, name, tb)
        self.failures.append(TaskFailure(name, time.time(), f"{type(exc).__name__}: {exc}", tb))
        del self.failures[:-_KEEP_FAILURES]

    def health(self) -> dict[str, Any]:
        failed = [n for n, s in self._supervised.items() if s == "failed"]
        return {
            "component": self.component,
            "healthy": not self.failures and not failed,
            "tasks": len(self._tasks),
            "failures": [f.to_dict() for f in self.failures[-5:]],
            "restarts": dict(self.restarts),
            "stopped_loops": failed,
        }

    async def aclose(self) -> None:
        """Cancel every task and wait for them. One that lets a cancellation pass
        (Python 3.11's ``asyncio.wait_for`` loses one that meets its inner result) is
        cancelled again every ``RECANCEL_S``, named in the log; one still running
        after ``CLOSE_GIVE_UP_S`` is left behind with an error, so a stop ends."""
        tasks = list(self._tasks)
        deadline = time.monotonic() + CLOSE_GIVE_UP_S
        while tasks:
            for task in tasks:
                task.cancel()
            left = deadline - time.monotonic()
            if left <= 0:
                names = ", ".join(sorted(t.get_name() for t in tasks))
                log.error("%s: left running at close: %s", self.component, names)
                return
            await asyncio.wait(tasks, timeout=min(RECANCEL_S, left))
            for task in tasks:
                if task.done() and not task.cancelled():
                    task.exception()  # retrieved (recorded by _done when it failed)
            tasks = [t for t in tasks if not t.done()]
            if tasks:
                names = ", ".join(sorted(t.get_name() for t in tasks))
                log.warning("%s: still running after cancel, again: %s", self.component, names)


def health() -> list[dict[str, Any]]:
    """Every live task group's health, unhealthy first."""
    rows = [g.health() for g in list(_GROUPS)]
    return sorted(rows, key=lambda r: (r["healthy"], r["component"]))


async def every(
    interval_s: float,
    tick: Callable[[], Awaitable[object]],
    logger: logging.Logger,
    what: str,
    *,
    first_now: bool = False,
    expected: tuple[type[Exception], ...] = (TenantryError,),
) -> None:
    """Await ``tick()`` every ``interval_s`` seconds until cancelled (the first at
    once with ``first_now``); a tick that raises is logged and the next one runs:
    an ``expected`` error (by default Tenantry's own, which say what went wrong) as a
    warning with its message, any other with its traceback."""
    if first_now:
        await _tick(tick, logger, what, expected)
    while True:
        await asyncio.sleep(interval_s)
        await _tick(tick, logger, what, expected)


async def _tick(
    tick: Callable[[], Awaitable[object]],
    logger: logging.Logger,
    what: str,
    expected: tuple[type[Exception], ...],
) -> None:
    try:
        await tick()
    except expected as exc:
        logger.warning("%s failed: %s", what, exc)
    except Exception:
        logger.exception("%s failed", what)
