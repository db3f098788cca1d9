"""``tenantry serve``: bind the private Unix socket and run the app under uvicorn.

One daemon per socket: an exclusive lock on ``<state>/daemon.lock`` is held
for the daemon's life. The socket's directory is 0700 and the socket 0600.
"""

from __future__ import annotations

import asyncio
import contextlib
import faulthandler
import fcntl
import gc
import logging
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Generator
from pathlib import Path
from typing import IO, Any

import uvicorn

from tenantry import __version__
from tenantry.core.errors import Conflict, UsageError
from tenantry.core.settings import Settings
from tenantry.gateway.app import create_app
from tenantry.gateway.limits import protocol_with

log = logging.getLogger(__name__)


def _private_dir(path: Path) -> None:
    """Make ``path`` a directory only its owner may enter; never a shared one (``/tmp``)."""
    import stat

    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    st = path.stat()
    if st.st_uid != os.getuid():
        raise UsageError(f"{path} belongs to uid {st.st_uid}, not to you")
    if st.st_mode & (stat.S_ISVTX | stat.S_IWOTH):
        # root owns /tmp: making it 0700 would lock every other user out of it
        raise UsageError(
            f"{path} is a shared directory (mode {stat.S_IMODE(st.st_mode):o}); the daemon"
            " keeps its socket and state in a private one",
            hint="give --socket (or TENANTRY_SOCKET) a path in a directory of its own,"
            " e.g. /tmp/tenantry-$USER/sock",
        )
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


def record_backend(state: Path, backend: str) -> None:
    """The backend is part of the state: later autostarts serve the same one."""
    from tenantry.client.sync import BACKEND_FILE

    path = state / BACKEND_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(backend + "\n")
    os.replace(tmp, path)


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


def _pidfd_child_watcher() -> None:
    """On Python 3.11, reap children with pidfds instead of a thread per child.

    (3.12+ does this by default.) Saves about a millisecond per command.
    """
    if sys.version_info >= (3, 12) or not hasattr(os, "pidfd_open"):
        return
    try:
        fd = os.pidfd_open(os.getpid())
    except OSError:
        return  # kernel without pidfd support
    os.close(fd)
    watcher = asyncio.PidfdChildWatcher()
    asyncio.set_child_watcher(watcher)
    watcher.attach_loop(asyncio.get_running_loop())


def settle_heap() -> None:
    """Keep what the daemon built to start (modules, policies, caches: most of its
    heap, and all of it lives as long as the daemon) out of the cyclic collector's
    scans: collect once, then freeze the survivors. Without it every full collection,
    which a burst of requests brings on again and again, walked all of them."""
    gc.collect()
    gc.freeze()


def unix_server(settings: Settings, app: Any, **options: Any) -> uvicorn.Server:
    """The uvicorn server of ``app`` on a Unix socket, with the daemon's limits.

    ``options`` are more ``uvicorn.Config`` settings for this server.
    """
    return uvicorn.Server(limited_config(settings, app, **options))


def limited_config(settings: Settings, app: Any, **options: Any) -> uvicorn.Config:
    """uvicorn's config with the daemon's limits (header timeout, connections, keep-alive)."""
    defaults: dict[str, Any] = {
        "http": protocol_with(float(settings.header_timeout_s)),
        "limit_concurrency": int(settings.max_connections),
        "timeout_keep_alive": int(max(1, settings.idle_timeout_s)),
        "lifespan": "on",
        "log_level": "warning",
        "access_log": False,
        "timeout_graceful_shutdown": 5,
    }
    return uvicorn.Config(app, **{**defaults, **options})


@contextlib.asynccontextmanager
async def dashboard_alongside(settings: Settings, app: Any) -> AsyncIterator[None]:
    """Serves the dashboard and /metrics of ``--http`` (when set) while the block runs."""
    if not settings.http:
        yield
        return
    http, tcp = _http_server(settings, app)
    task = asyncio.create_task(http.serve(sockets=[tcp]))
    try:
        yield
    finally:
        http.should_exit = True
        await task


@contextlib.asynccontextmanager
async def hooks_alongside(settings: Settings, app: Any) -> AsyncIterator[None]:
    """Answers agent hooks on ``hook_http`` (loopback TCP, when set) while the block runs."""
    if not settings.hook_http:
        yield
        return
    from tenantry.gateway import hookserve

    tcp = hookserve.bind(settings.hook_http)
    http = protocol_with(float(settings.header_timeout_s), tcp_peers=True)
    config = limited_config(
        settings, hookserve.loopback_app(app), lifespan="off", http=http, proxy_headers=False
    )  # the caller's uid is the kernel's record of the socket; no proxy stands in front
    server = _QuietServer(config)
    task = asyncio.create_task(server.serve(sockets=[tcp]))
    log.info("agent hooks on http://%s:%d/v1/hook/", *tcp.getsockname()[:2])
    try:
        yield
    finally:
        server.should_exit = True
        await task


async def serve(settings: Settings) -> None:
    _pidfd_child_watcher()
    state = Path(settings.state_dir)
    _private_dir(state)
    lock = take_lock(state)
    record_backend(state, settings.backend)
    sock_path = Path(settings.socket)
    if len(str(sock_path)) > 100:
        raise UsageError(f"socket path too long for a Unix socket: {sock_path}")
    sock = bind_socket(sock_path)
    app = create_app(settings, on_ready=settle_heap)
    # a private Unix socket: no proxy in front
    server = unix_server(settings, app, proxy_headers=False)
    app.state.session_listener = SessionListener(server)
    try:
        async with dashboard_alongside(settings, app), hooks_alongside(settings, app):
            log.info(
                "tenantry %s serving %s (backend %s, state %s%s); Ctrl-C to stop",
                __version__,
                sock_path,
                settings.backend,
                state,
                f", dashboard on http://{settings.http}" if settings.http else "",
            )
            await server.serve(sockets=[sock])
    finally:
        with contextlib.suppress(FileNotFoundError):
            if sock_path.exists():
                sock_path.unlink()
        lock.close()


class SessionListener:
    """Binds per-session sockets served by the same app and protocol as the main one.

    Sandboxed agent sessions each get one (``sandbox.registry``); a connection on
    it carries the socket's path in its scope, which names the session.
    """

    def __init__(self, server: uvicorn.Server) -> None:
        self.server = server

    async def listen(self, path: Path) -> Callable[[], Awaitable[None]]:
        server = self.server
        config = server.config
        sock = bind_socket(path)

        def factory(_loop: asyncio.AbstractEventLoop | None = None) -> asyncio.Protocol:
            proto: asyncio.Protocol = config.http_protocol_class(  # type: ignore[call-arg]
                config=config,
                server_state=server.server_state,
                app_state=server.lifespan.state,
                _loop=_loop,
            )
            return proto

        listener = await asyncio.get_running_loop().create_server(factory, sock=sock)

        async def close() -> None:
            listener.close()
            with contextlib.suppress(FileNotFoundError):
                path.unlink()

        return close


class _QuietServer(uvicorn.Server):
    """A second uvicorn server that leaves signal handling to the main one."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


def parse_http(value: str) -> tuple[str, int]:
    """``HOST:PORT``, ``:PORT`` or ``PORT``; the host defaults to loopback."""
    host, _, port = value.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    try:
        number = int(port)
    except ValueError as exc:
        raise UsageError(f"--http wants HOST:PORT, got {value!r}") from exc
    if not 0 <= number < 65536:
        raise UsageError(f"port {number} is out of range")
    return host, number


def _http_server(settings: Settings, app: Any) -> tuple[uvicorn.Server, socket.socket]:
    """The dashboard and /metrics listener of ``--http`` (bound now, served later)."""
    from tenantry.gateway.dashboard.routes import TOKEN_FILE, ensure_token, http_app

    host, port = parse_http(settings.http)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        tcp = socket.create_server((host, port), family=family, reuse_port=False)
    except OSError as exc:
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror}") from exc
    ensure_token(settings.state_dir)
    if host not in {"127.0.0.1", "::1", "localhost"}:
        log.warning("the dashboard listens on %s, beyond this machine (token required)", host)
    log.info(
        "dashboard on http://%s:%d/ (token in %s)",
        host,
        tcp.getsockname()[1],
        Path(settings.state_dir) / TOKEN_FILE,
    )
    config = uvicorn.Config(
        http_app(lambda: getattr(app.state, "runtime", None)),
        lifespan="off",
        log_level="warning",
        access_log=False,
    )
    return _QuietServer(config), tcp


def run(settings: Settings) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    # `kill -USR1 <pid>`: every thread's stack to the daemon's stderr (its log), for
    # a daemon that hangs; the signal does not stop it
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    asyncio.run(serve(settings))
    return 0
