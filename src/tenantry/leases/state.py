"""What the lease manager keeps per command and per lease while it runs."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from tenantry.core.models import CommandResult, CommandSpec, Principal
from tenantry.leases.model import Lease, PoolKey
from tenantry.leases.pilot import protocol as p

Sink = Callable[[str, bytes], Awaitable[None]]

EXIT_STATE = {
    "completed": "completed",
    "failed": "failed",
    "timeout": "timeout",
    "cancelled": "error",
    "error": "error",
}


def key_hex(secret: str) -> str:
    return p.key_of(secret).hex()


class Tail:
    """The last ``cap`` bytes of a stream."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.buf = bytearray()
        self.truncated = False

    def add(self, data: bytes) -> None:
        self.buf += data
        if len(self.buf) > 2 * self.cap:
            del self.buf[: len(self.buf) - self.cap]
            self.truncated = True

    def text(self) -> str:
        if len(self.buf) > self.cap:
            self.truncated = True
            return bytes(self.buf[-self.cap :]).decode("utf-8", "replace")
        return self.buf.decode("utf-8", "replace")


@dataclass(eq=False)
class Cmd:
    id: str
    spec: CommandSpec
    principal: Principal
    sink: Sink
    key: PoolKey
    future: asyncio.Future[CommandResult]
    out: Tail
    err: Tail
    need_s: float = 0.0
    queued_at: float = field(default_factory=time.monotonic)
    attempts: int = 0
    lease: str = ""
    orphan: bool = False  # started by an earlier daemon; its result goes to the store


@dataclass(eq=False)
class Live:
    """A lease plus what only the running daemon knows of it."""

    lease: Lease
    writer: asyncio.StreamWriter | None = None
    running: dict[str, Cmd] = field(default_factory=dict)
    watch: asyncio.Task[None] | None = None
    final: str = "ended"  # terminal state once a draining pilot exits
    secret: str = field(default="", repr=False)
    next_query: float = 0.0
    heard: float = 0.0  # monotonic time of the pilot's last message
    # environments sent on the current connection (by id, first in first out; see p.Env)
    envs: dict[str, None] = field(default_factory=dict)


def lease_ready(live: Live) -> bool:
    return live.lease.state == "ready"


def fail(cmd: Cmd, err: BaseException) -> None:
    if not cmd.future.done() and not cmd.orphan:
        cmd.future.set_exception(err)
