"""A facility replica process for the failover test: ReplicatedStatus on real Slurm.

Usage: python replica_proc.py DSN SOCKET NAME

Serves JSON lines on the Unix socket SOCKET (a test harness, not the facility
service's protocol): ``{"op": "health"}`` and ``{"op": "wait", "job", "since",
"timeout"}`` (as staff: the test reads everyone's jobs).
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from tenantry.core import errors
from tenantry.facility.poller import SlurmSnapshotSource, Viewer
from tenantry.facility.replica import ReplicatedStatus

STAFF = Viewer(0, "root", is_staff=True)


async def main(dsn: str, path: str, name: str) -> None:
    status = ReplicatedStatus(
        dsn, SlurmSnapshotSource(timeout_s=20), name=name, interval_s=0.5, resync_s=0.5
    )
    await status.start()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while line := await reader.readline():
                req = json.loads(line)
                answer: dict[str, Any]
                try:
                    if req["op"] == "health":
                        answer = {"ok": True, "result": status.health()}
                    else:
                        view = await status.wait_change(
                            str(req["job"]), STAFF, int(req["since"]),
                            timeout_s=float(req["timeout"]),
                        )  # fmt: skip
                        answer = {"ok": True, "result": view.to_dict()}
                except errors.TenantryError as exc:
                    answer = {"ok": False, "error": exc.to_dict()}
                writer.write(json.dumps(answer).encode() + b"\n")
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    server = await asyncio.start_unix_server(serve, path)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
