"""``tenantry facility serve``: the facility service on a socket every user may open.

The service runs under its own system account. Its socket's directory is
0755 and the socket 0666: any local user may connect, and the kernel tells the
service who they are (``SO_PEERCRED``; ``facility.identity``). Staff are the
members of ``facility_staff_group``, read at start: they become the service's
``memory_staff`` and ``admin_users``. The service runs the components that
govern agents (audit, kill switch, policy, budgets, memory, metrics) and the
facility's own (``facility.service``); it never runs a user's job or command.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from pathlib import Path

from tenantry import __version__
from tenantry.core.errors import UsageError
from tenantry.core.settings import Settings
from tenantry.facility.identity import staff_members
from tenantry.gateway.app import COMPONENTS, create_app
from tenantry.gateway.server import (
    _pidfd_child_watcher,
    _private_dir,
    dashboard_alongside,
    take_lock,
    unix_server,
)

log = logging.getLogger(__name__)

# what governs agents, as the user daemon has it, plus the service's own component
GOVERNING = frozenset({"metrics", "audit", "kill", "policy", "budgets", "memory"})
FACILITY_COMPONENTS: tuple[tuple[str, str], ...] = (
    *(c for c in COMPONENTS if c[0] in GOVERNING),
    ("facility_service", "tenantry.facility.service:create"),
    ("facility_tcp", "tenantry.facility.tcp:create"),  # other login nodes (facility_tcp)
)


def _names(*lists: str) -> str:
    out: set[str] = set()
    for raw in lists:
        out |= {u.strip() for u in raw.split(",") if u.strip()}
    return ",".join(sorted(out))


def service_settings(settings: Settings) -> Settings:
    """The service's settings: staff from the group, never an executor itself."""
    staff = ",".join(sorted(staff_members(settings.facility_staff_group)))
    return settings.replace(
        memory_staff=_names(settings.memory_staff, staff),
        admin_users=_names(settings.admin_users, staff),
        facility_address="",
    )


def bind_public_socket(path: Path) -> socket.socket:
    """A socket every local user may connect to, in a directory only we may write."""
    if len(str(path)) > 100:
        raise UsageError(f"socket path too long for a Unix socket: {path}")
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
    st = path.parent.stat()
    if st.st_uid != os.getuid():
        raise UsageError(
            f"{path.parent} belongs to uid {st.st_uid}, not to the service's account",
            hint="create it for the service (`tenantry facility install` does)",
        )
    os.chmod(path.parent, 0o755)  # noqa: S103 - users traverse to the socket
    with contextlib.suppress(FileNotFoundError):
        path.unlink()  # stale: we hold the service lock
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    os.chmod(path, 0o666)  # noqa: S103 - every user connects; the kernel names them
    return sock


async def serve_facility(settings: Settings) -> None:
    _pidfd_child_watcher()
    settings = service_settings(settings)
    state = Path(settings.state_dir)
    _private_dir(state)
    lock = take_lock(state)
    sock_path = Path(settings.facility_socket)
    sock = bind_public_socket(sock_path)
    app = create_app(settings, components=FACILITY_COMPONENTS)
    server = unix_server(settings, app, proxy_headers=False)  # callers are proven by the socket
    try:
        # the dashboard and /metrics of the whole facility (token in the service's state)
        async with dashboard_alongside(settings, app):
            log.info(
                "tenantry %s facility service on %s (state %s, staff group %s)",
                __version__,
                sock_path,
                state,
                settings.facility_staff_group or "-",
            )
            await server.serve(sockets=[sock])
    finally:
        with contextlib.suppress(FileNotFoundError):
            sock_path.unlink()
        lock.close()


def run(settings: Settings) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    asyncio.run(serve_facility(settings))
    return 0
