"""The daemon's registry of sandboxed agent sessions and their sockets.

``tenantry agent`` registers a session through the user's own socket; the
registry creates the session's directory (0700) and a Unix socket in it
(0600), and listens on it. A request that arrives on that socket *is* the
session: its agent product, id and project come from here, never from the
request. Once the launcher reports the sandbox's PID-namespace init
(``attach``), the kill switch can end the whole tree with one signal.
Sessions are kept in ``<state>/sandbox/sessions.json`` so a restarted daemon
listens on their sockets again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import secrets
import shutil
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from tenantry.core.errors import Conflict, NotFound, PermissionDenied, UsageError
from tenantry.core.models import TIERS, AgentProduct, CommandSpec, Principal
from tenantry.safety.sandbox import profile
from tenantry.service.runtime import Runtime

log = logging.getLogger(__name__)

Listen = Callable[[Path], Awaitable[Callable[[], Awaitable[None]]]]


def pid_namespace(pid: int) -> str:
    """The PID-namespace id of a process (``pid:[4026531836]``), or ``""``."""
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return ""


@dataclass(frozen=True, slots=True)
class SandboxSession:
    id: str
    uid: int
    user: str
    agent: str
    project: str
    cwd: str
    argv: list[str]
    socket: str
    created: float
    init_pid: int = 0
    pidns: str = ""
    state: str = "starting"  # starting | running | stopped | ended
    ended: float = 0.0
    claims: list[dict[str, str]] = field(default_factory=list)
    tier: str = ""  # chosen by the user at launch: only ever stricter than the facility's

    def principal(self, host: str) -> Principal:
        try:
            agent = AgentProduct(self.agent)
        except ValueError:
            agent = AgentProduct.OTHER_AGENT
        return Principal(
            uid=self.uid,
            user=self.user,
            agent=agent,
            session=self.id,
            host=host,
            project=self.project,
            origin="sandboxed",
            tier=self.tier,
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class SandboxRegistry:
    """Component ``sandbox``: sessions, their sockets, and their PID namespaces."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.base = Path(runtime.settings.socket).parent / "sessions"
        self.file = runtime.settings.state_path / "sandbox" / "sessions.json"
        self._sessions: dict[str, SandboxSession] = {}
        self._by_socket: dict[str, str] = {}
        self._closers: dict[str, Callable[[], Awaitable[None]]] = {}
        self._listen: Listen | None = None
        self._host = os.uname().nodename

    # -- lifecycle -----------------------------------------------------------------
    async def start(self) -> None:
        with contextlib.suppress(FileNotFoundError, ValueError):
            for raw in json.loads(self.file.read_text()):
                s = SandboxSession(**raw)
                self._sessions[s.id] = s
                self._by_socket[s.socket] = s.id

    async def aclose(self) -> None:
        for closer in list(self._closers.values()):
            with contextlib.suppress(Exception):
                await closer()
        self._closers.clear()

    async def attach_listener(self, listen: Listen) -> None:
        """Called by the server once it can listen: bind the live sessions' sockets."""
        self._listen = listen
        for s in list(self._sessions.values()):
            if s.state in ("starting", "running", "stopped") and self._alive(s):
                await self._bind(s)
            elif s.state != "ended":
                self._end(s.id)

    def _alive(self, s: SandboxSession) -> bool:
        return s.state == "starting" or bool(s.pidns and pid_namespace(s.init_pid) == s.pidns)

    def _save(self) -> None:
        self.file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = self.file.with_suffix(".tmp")
        live = [s.to_dict() for s in self._sessions.values() if s.state != "ended"]
        tmp.write_text(json.dumps(live))
        os.chmod(tmp, 0o600)
        tmp.replace(self.file)

    async def _bind(self, s: SandboxSession) -> None:
        if self._listen is None:
            raise UsageError(
                "this daemon does not serve session sockets",
                hint="start it with `tenantry serve` (or let the CLI start it)",
            )
        if s.id not in self._closers:
            self._closers[s.id] = await self._listen(Path(s.socket))

    # -- identity ------------------------------------------------------------------
    def by_socket(self, sockname: str) -> SandboxSession | None:
        sid = self._by_socket.get(sockname)
        return self._sessions.get(sid) if sid else None

    def by_pidns(self, pid: int) -> SandboxSession | None:
        """The session whose sandbox holds process ``pid`` (any socket it used)."""
        live = [s for s in self._sessions.values() if s.pidns and s.state != "ended"]
        if not live:
            return None
        ns = pid_namespace(pid)
        return next((s for s in live if s.pidns == ns), None) if ns else None

    def get(self, sid: str) -> SandboxSession:
        s = self._sessions.get(sid)
        if s is None:
            raise NotFound(f"no sandboxed session {sid!r}", hint="see `tenantry sessions`")
        return s

    def note_claims(self, s: SandboxSession, claims: dict[str, str]) -> bool:
        """Remember (once) what a session claimed about itself; True when new."""
        claimed = {k: v for k, v in claims.items() if k in ("agent", "session", "project") and v}
        own = {"agent": s.agent, "session": s.id, "project": s.project}
        differs = {k: v for k, v in claimed.items() if own.get(k) != v}
        if not differs or differs in s.claims or len(s.claims) >= 20:
            return False
        self._sessions[s.id] = replace(s, claims=[*s.claims, differs])
        self._save()
        return True

    # -- registering and ending ------------------------------------------------------
    async def register(
        self,
        by: Principal,
        *,
        agent: str,
        project: str,
        cwd: str,
        argv: list[str],
        tier: str = "",
    ) -> SandboxSession:
        if by.origin != "user":
            raise PermissionDenied(
                "only the user's own socket, outside any sandbox, may start agent sessions",
                hint="run `tenantry agent` from your own shell",
            )
        if tier and tier not in TIERS:
            raise UsageError(f"unknown tier {tier!r}", hint=f"tiers are {', '.join(TIERS)}")
        sid = "sb-" + secrets.token_hex(6)
        directory = self.base / sid
        directory.mkdir(parents=True, mode=0o700)
        s = SandboxSession(
            id=sid,
            uid=by.uid,
            user=by.user,
            agent=agent,
            project=project,
            cwd=cwd,
            argv=argv,
            socket=str(directory / "sock"),
            created=time.time(),
            tier=tier,
        )
        self._sessions[sid] = s
        self._by_socket[s.socket] = sid
        await self._bind(s)
        self._save()
        return s

    async def attach(self, by: Principal, sid: str, init_pid: int) -> SandboxSession:
        s = self.get(sid)
        if by.origin != "user" or s.uid != by.uid:
            raise PermissionDenied("only the user who started a session may attach its sandbox")
        if s.state != "starting":
            raise Conflict(f"session {sid} is already {s.state}")
        ns = pid_namespace(init_pid)
        if not ns or ns == pid_namespace(os.getpid()):
            raise UsageError(f"process {init_pid} is not the init of a new PID namespace")
        try:
            owner = os.stat(f"/proc/{init_pid}").st_uid
        except OSError as exc:
            raise NotFound(f"no process {init_pid}") from exc
        if owner != s.uid:
            raise PermissionDenied(f"process {init_pid} does not belong to uid {s.uid}")
        s = replace(s, init_pid=init_pid, pidns=ns, state="running")
        self._sessions[sid] = s
        self._save()
        return s

    async def end(self, by: Principal, sid: str) -> SandboxSession:
        s = self.get(sid)
        if by.origin != "user" or s.uid != by.uid:
            raise PermissionDenied("only the user who started a session may end it")
        self.kill_tree(s)
        return await self._close(sid)

    def _end(self, sid: str) -> None:
        s = self._sessions[sid]
        self._sessions[sid] = replace(s, state="ended", ended=time.time())
        self._by_socket.pop(s.socket, None)
        shutil.rmtree(Path(s.socket).parent, ignore_errors=True)
        self._save()

    async def _close(self, sid: str) -> SandboxSession:
        closer = self._closers.pop(sid, None)
        if closer is not None:
            with contextlib.suppress(Exception):
                await closer()
        self._end(sid)
        return self._sessions[sid]

    def list(self) -> list[SandboxSession]:
        return sorted(self._sessions.values(), key=lambda s: s.created)

    # -- the kill switch -------------------------------------------------------------
    def kill_tree(self, s: SandboxSession) -> bool:
        """SIGKILL the sandbox's PID-namespace init: the kernel ends every process in it."""
        if not s.pidns or pid_namespace(s.init_pid) != s.pidns:
            return False  # gone already (or the pid was reused: never signal a stranger)
        with contextlib.suppress(ProcessLookupError):
            os.kill(s.init_pid, signal.SIGKILL)
        return True

    async def kill_principal(self, key: str) -> int:
        """Kill-switch hook: end the sandbox of every session matching ``key``."""
        prefix = key.rstrip("/") + "/"
        n = 0
        for s in list(self._sessions.values()):
            pkey = s.principal(self._host).key
            if s.state in ("running", "starting") and (pkey == key or pkey.startswith(prefix)):
                if self.kill_tree(s):
                    n += 1
                self._sessions[s.id] = replace(s, state="stopped")
        if n:
            self._save()
            await asyncio.sleep(0)
        return n

    # -- commands the daemon runs for a session ---------------------------------------
    def confine(self, spec: CommandSpec, p: Principal, where: str = "local") -> CommandSpec:
        """Wrap a command run for a sandboxed session in the same profile.

        On a lease (``where="lease"``) the pilot runs it on a compute node, so
        the session directory may be missing there and ``bwrap`` is the node's.
        """
        if p.origin != "sandboxed":
            return spec
        s = self._sessions.get(p.session)
        if s is None:
            raise PermissionDenied("this session is not registered any more")
        from tenantry.safety.sandbox.bwrap import find_bwrap

        settings = self.runtime.settings
        paths = self.paths(s)
        env = profile.session_env(
            spec.env, paths, session=s.id, agent=s.agent, project=s.project,
            extra_allow=_split(settings.sandbox_env_allow),
        )  # fmt: skip
        lease = where == "lease"
        bwrap = (settings.sandbox_bwrap or "bwrap") if lease else find_bwrap(settings.sandbox_bwrap)
        argv = profile.bwrap_argv(
            bwrap, paths, spec.argv, env,
            extra_hidden=_split(profile.hidden_extra(
                settings.sandbox_hide, settings.facility_address, settings.facility_socket)),
            bind_try=lease,
            keep_visible=profile.own_runtime(),
        )  # fmt: skip
        argv[argv.index("--chdir") + 1] = spec.cwd
        return replace(spec, argv=tuple(argv), env={})

    def paths(self, s: SandboxSession) -> profile.SessionPaths:
        settings = self.runtime.settings
        home = os.path.expanduser("~")
        return profile.SessionPaths(
            home=home,
            project=s.cwd,
            state_dir=str(settings.state_path),
            session_dir=str(Path(s.socket).parent),
            inside_runtime=inside_runtime(),
            scratch=tuple(_split(settings.sandbox_writable)),
        )


def _split(raw: str) -> list[str]:
    return [os.path.expanduser(x.strip()) for x in raw.split(",") if x.strip()]


def inside_runtime(env: dict[str, str] | None = None) -> str:
    """``XDG_RUNTIME_DIR`` inside the sandbox: the user's own when it has one."""
    env = dict(os.environ) if env is None else env
    runtime = env.get("XDG_RUNTIME_DIR", "")
    return runtime if runtime and os.path.isdir(runtime) else profile.FALLBACK_RUNTIME


def create(runtime: Runtime) -> SandboxRegistry:
    registry = SandboxRegistry(runtime)
    runtime.sandboxes = registry
    return registry
