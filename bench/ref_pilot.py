"""A reference pilot for bench/commands.py: what a minimal command runner costs.

    python bench/ref_pilot.py SOCKET SLOTS

An asyncio server on a Unix socket; each line is ``{"id", "argv"}``, each
answer ``{"id", "code"}``; at most SLOTS commands run at once, output read from
pipes and dropped. No identity, policy, audit or journal: the floor a gateway
that does those is compared to.
"""

from __future__ import annotations

import asyncio
import json
import sys


async def run(argv: list[str]) -> int:
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    await proc.communicate()
    return proc.returncode if proc.returncode is not None else 255


async def serve(path: str, slots: int) -> None:
    sem = asyncio.Semaphore(slots)

    async def client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        async def one(msg: dict[str, object]) -> None:
            async with sem:
                try:
                    code = await run(list(msg["argv"]))  # type: ignore[call-overload]
                except OSError:
                    code = 127
            writer.write(json.dumps({"id": msg["id"], "code": code}).encode() + b"\n")

        tasks = set()
        while line := await reader.readline():
            task = asyncio.create_task(one(json.loads(line)))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        await asyncio.gather(*tasks)
        writer.close()

    server = await asyncio.start_unix_server(client, path)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(serve(sys.argv[1], int(sys.argv[2])))
