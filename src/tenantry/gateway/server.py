"""``tenantry serve``: bind the private Unix socket and run the app under uvicorn.

One daemon per socket: an exclusive lock on ``<state>/daemon.lock`` is held
for the daemon's life. The socket's directory is 0700 and the socket 0600.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import socket
from pathlib import Path
from typing import IO

import uvicorn

from tenantry.errors import Conflict, UsageError
from tenantry.gateway.app import create_app
from tenantry.gateway.peercred import PeerCredProtocol
from tenantry.settings import Settings

log = logging.getLogger(__name__)


def _private_dir(path: Path) -> None:
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    st = path.stat()
    if st.st_uid != os.getuid():
        raise UsageError(f"{path} belongs to uid {st.st_uid}, not to you")
    os.chmod(path, 0o700)


def take_lock(state: Path) -> IO[str]:
    lock = (state / "daemon.lock").open("a+")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError as exc:
        lock.seek(0)
        pid = lock.read().strip() or "?"
        lock.close()
        raise Conflict(
            f"a Tenantry daemon (pid {pid}) already serves {state}",
            hint="use it, or stop it first",
        ) from exc
    lock.seek(0)
    lock.truncate()
    lock.write(str(os.getpid()))
    lock.flush()
    return lock


def bind_socket(path: Path) -> socket.socket:
    _private_dir(path.parent)
    with contextlib.suppress(FileNotFoundError):
        path.unlink()  # stale: we hold the daemon lock, so no live daemon owns it
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        sock.bind(str(path))
    finally:
        os.umask(old)
    os.chmod(path, 0o600)
    # not listening yet: uvicorn listens once the lifespan has started, so a
    # client that can connect knows the daemon is ready
    return sock


async def serve(settings: Settings) -> None:
    state = Path(settings.state_dir)
    _private_dir(state)
    lock = take_lock(state)
    sock_path = Path(settings.socket)
    if len(str(sock_path)) > 100:
        raise UsageError(f"socket path too long for a Unix socket: {sock_path}")
    sock = bind_socket(sock_path)
    app = create_app(settings)
    config = uvicorn.Config(
        app,
        http=PeerCredProtocol,
        lifespan="on",
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=5,
    )
    server = uvicorn.Server(config)
    try:
        await server.serve(sockets=[sock])
    finally:
        with contextlib.suppress(FileNotFoundError):
            if sock_path.exists():
                sock_path.unlink()
        lock.close()


def run(settings: Settings) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    asyncio.run(serve(settings))
    return 0
