"""The pilot's command descriptors on one epoll set of its own, watched by the loop as one.

Every command the pilot runs brings three descriptors (its two pipes, its
pidfd), each registered and removed once. Through the event loop's
``add_reader`` that is the selector's per-descriptor bookkeeping in Python
(keys, handles, transport checks) six times per command; here it is one
``epoll_ctl`` each, and the loop watches the set's own descriptor, which is
readable while any member is (level-triggered, as the loop's selector is).
Where there is no ``select.epoll`` the loop's own readers are used.

Standard library only: the pilot runs on compute nodes.
"""

from __future__ import annotations

import asyncio
import select
from collections.abc import Callable
from typing import Any


class FdSet:
    """``add_reader``/``remove_reader`` as the loop's, for the pilot's command descriptors."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._calls: dict[int, tuple[Callable[..., None], tuple[Any, ...]]] = {}
        self._ep = select.epoll() if hasattr(select, "epoll") else None
        if self._ep is not None:
            loop.add_reader(self._ep.fileno(), self._ready)

    def add_reader(self, fd: int, call: Callable[..., None], *args: Any) -> None:
        if self._ep is None:
            self._loop.add_reader(fd, call, *args)
            return
        self._ep.register(fd, select.EPOLLIN)
        self._calls[fd] = (call, args)

    def remove_reader(self, fd: int) -> None:
        """Stop watching ``fd`` (before it is closed)."""
        if self._ep is None:
            self._loop.remove_reader(fd)
            return
        if self._calls.pop(fd, None) is not None:
            self._ep.unregister(fd)

    def close(self) -> None:
        if self._ep is not None:
            self._loop.remove_reader(self._ep.fileno())
            self._ep.close()
            self._calls.clear()

    def _ready(self) -> None:
        assert self._ep is not None
        ready = [(fd, self._calls.get(fd)) for fd, _ in self._ep.poll(0)]
        for fd, entry in ready:
            # an earlier callback of this turn may have removed it, and its number may
            # already name a new descriptor (a command that ends starts the next)
            if entry is not None and self._calls.get(fd) is entry:
                call, args = entry
                call(*args)
