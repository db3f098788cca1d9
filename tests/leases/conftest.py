"""Fixtures for lease tests: a manager on a real backend, pilots as real processes."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from tenantry.backends.local import LocalBackend
from tenantry.core.events import Bus, Event
from tenantry.core.models import AgentProduct, Principal
from tenantry.core.settings import load
from tenantry.leases.manager import LeaseManager
from tenantry.leases.model import LeaseConfig

FAST = {"heartbeat_s": 0.5, "reconnect_grace_s": 5.0, "tick_s": 0.1, "idle_s": 60.0}


async def until(cond: Callable[[], Any], timeout: float = 15.0, what: str = "") -> Any:
    """Wait for ``cond()`` to be truthy (polled), or fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(
                f"timed out waiting for {what() if callable(what) else what or cond}"
            )
        await asyncio.sleep(0.02)


class Collect:
    """An output sink that keeps what it got."""

    def __init__(self) -> None:
        self.chunks: list[tuple[str, bytes]] = []

    async def __call__(self, stream: str, data: bytes) -> None:
        self.chunks.append((stream, data))

    def text(self, stream: str = "stdout") -> str:
        return b"".join(d for s, d in self.chunks if s == stream).decode()


class Stack:
    def __init__(self, state_dir: str) -> None:
        self.state_dir = state_dir
        self.settings = load(env={}, overrides={"state_dir": state_dir})
        self.events: list[Event] = []
        self.bus = Bus()
        self.managers: list[LeaseManager] = []
        self.backends: list[Any] = []

        async def record(ev: Event) -> None:
            self.events.append(ev)

        self.bus.subscribe(record)

    async def backend(self) -> LocalBackend:
        be = LocalBackend(self.state_dir, slots=8)
        await be.start()
        self.backends.append(be)
        return be

    async def manager(self, backend: Any = None, **cfg: Any) -> LeaseManager:
        be = backend or await self.backend()
        config = LeaseConfig.from_settings(self.settings, **{**FAST, **cfg})
        mgr = LeaseManager(self.settings, be, self.bus, config)
        await mgr.start()
        self.managers.append(mgr)
        return mgr

    def kinds(self) -> list[str]:
        return [e.type.value for e in self.events]

    async def close(self) -> None:
        for mgr in reversed(self.managers):
            if mgr._closing:
                continue
            await mgr.release_all("test over")

            def ended(m: LeaseManager = mgr) -> bool:
                return not m.leases()

            try:
                await until(ended, 10, "leases to end")
            finally:
                await mgr.aclose()
        for be in self.backends:
            jobs = getattr(be, "_jobs", {})

            def done(j: dict[str, Any] = jobs) -> bool:
                return all(e.state.terminal for e in j.values())

            try:
                await until(done, 5, "jobs")
            except AssertionError:
                for jid, entry in list(jobs.items()):
                    if not entry.state.terminal:
                        await be.cancel(jid)
            await be.aclose()


@pytest.fixture
async def stack(state_dir: str) -> AsyncIterator[Stack]:
    s = Stack(state_dir)
    try:
        yield s
    finally:
        await s.close()


@pytest.fixture
def alice() -> Principal:
    return Principal(
        uid=os.getuid(), user="alice", agent=AgentProduct.CLAUDE_CODE, session="s1", host="login1"
    )


Until = Callable[..., Awaitable[Any]]


@pytest.fixture
def wait() -> Callable[..., Awaitable[Any]]:
    return until


@pytest.fixture
def collect() -> type[Collect]:
    return Collect
