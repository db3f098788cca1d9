"""The ``commands.run`` op: stream a short command's output, then its result."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from tenantry.commands.service import CommandService, Utf8Chunks
from tenantry.core.models import CommandSpec
from tenantry.safety.guard.adapters import StreamGuard, guard_command_result
from tenantry.service.ops import OpContext, Schema, op

RUN_FIELDS: Schema = {
    "argv": list,
    "cwd": str,
    "env": dict,
    "timeout_s": (int, float),
    "resources": dict,
    "where": str,
    "idempotent": bool,
}

# chunks (of at most 64 KiB each) buffered between a command and its client
STREAM_QUEUE = 16


@op(
    "commands.run",
    "Run a short command and stream its output",
    streaming=True,
    action="run_command",
    fields=RUN_FIELDS,
)
async def run(ctx: OpContext, params: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
    spec = CommandSpec.from_dict(params)
    svc = ctx.runtime.component("commands", CommandService)
    # bounded: a client that reads slowly slows the command's pipes down (the
    # runner stops reading, the command blocks on write) instead of the daemon
    # buffering its whole output
    queue: asyncio.Queue[tuple[str, str] | None] = asyncio.Queue(STREAM_QUEUE)
    dec = Utf8Chunks()

    async def sink(stream: str, data: bytes) -> None:
        text = dec.feed(stream, data)
        if text:
            await queue.put((stream, text))

    async def work() -> Any:
        try:
            return await svc.run(ctx.principal, spec, sink)
        finally:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                with contextlib.suppress(asyncio.QueueFull):
                    queue.put_nowait(None)  # nobody reads any more
            else:
                await queue.put(None)

    # Output reaching an agent passes the untrusted-content guard (secrets
    # redacted, instruction-like text marked); a human's own output is left as is.
    agent = ctx.principal.is_agent
    origin = f"command:{spec.argv[0]}"
    guards = {s: StreamGuard(origin) for s in ("stdout", "stderr")} if agent else {}

    def clean(stream: str, text: str) -> str:
        return guards[stream].feed(text) if agent else text

    task = asyncio.get_running_loop().create_task(work())
    try:
        while (item := await queue.get()) is not None:
            text = clean(*item)
            if text:
                yield {"stream": item[0], "data": text}
        result = await task
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
    for stream in ("stdout", "stderr"):
        rest = clean(stream, dec.flush(stream)) + (guards[stream].flush() if agent else "")
        if rest:
            yield {"stream": stream, "data": rest}
    out = result.to_dict()
    if agent:
        out = guard_command_result(out, f"command:{result.id}")
        flagged = out["guard"]["instruction_like"] or any(
            f.kind == "injection" for g in guards.values() for f in g.findings
        )
        flags = ctx.runtime.flags
        if flagged and flags is not None:
            flags.note_flagged(ctx.principal)  # the policy holds what this session does next
    yield {"result": out}
