"""The client: HTTP/JSON over the daemon's Unix socket, standard library only.

It speaks through ``tenantry.client.wire`` (one codec for every client; no
``http.client``) on a kept-alive connection, starts the daemon on demand
(like ``ssh-agent``), under a lock so two callers never start two daemons,
and turns error envelopes back into ``TenantryError``s. Streaming ops arrive
as newline-delimited JSON chunks. An environment (``env``) this client sent
once goes by its digest afterwards (``wire.env_digest``).
"""

from __future__ import annotations

import _socket  # not ``socket``: its enums and selectors cost a cold start (see wire)
import os
import time

from tenantry.client import fastjson, wire
from tenantry.client.principal import client_claims
from tenantry.client.wire import API, PRINCIPAL_HEADER, REQUEST_ID_HEADER
from tenantry.core import errors
from tenantry.core.settings import Settings

TYPE_CHECKING = False  # the CLI client path avoids importing typing

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path
    from typing import Any

__all__ = ["API", "PRINCIPAL_HEADER", "REQUEST_ID_HEADER", "Client", "ensure_daemon"]

# ops the daemon answers idempotently, so a call that lost its connection
# (the daemon died mid-request) is retried with the same request id
RETRY_AFTER_LOSS = frozenset(
    {"jobs.submit", "jobs.cancel", "jobs.status", "jobs.list", "jobs.logs", "facility.info"}
)
RETRIES = 3


def new_request_id() -> str:
    return os.urandom(12).hex()


class HeldEnv:
    """The environment the daemon holds from one client: sent whole once, then by digest."""

    def __init__(self) -> None:
        self.env: dict[str, Any] | None = None
        self._digest = ""  # of ``env``, computed at its first use (a one-shot CLI never needs it)

    def params(self, params: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """``params`` with an environment the daemon holds replaced by its digest, and
        the environment they carry whole (to hold once the daemon accepts it), or None."""
        sent, whole = wire.held_env(params, self.env, self._digest)
        if whole is None and wire.ENV_DIGEST in sent:
            self._digest = sent[wire.ENV_DIGEST]
        return sent, whole

    def accepted(self, whole: dict[str, Any] | None) -> None:
        if whole is not None:
            self.env = dict(whole)
            self._digest = ""

    def answer(self, data: dict[str, Any], whole: dict[str, Any] | None) -> dict[str, Any] | None:
        """The last chunk of a stream the daemon answered with one JSON document, or None
        when it no longer holds the environment (a restart since): send it whole again."""
        if not data.get("ok"):
            err = errors.from_dict(data.get("error") or {})
            if isinstance(err, errors.EnvUnknown) and self.env is not None:
                self.env, self._digest = None, ""
                return None
            raise err
        self.accepted(whole)
        return {"result": data.get("result")}


class Client:
    def __init__(
        self,
        settings: Settings,
        *,
        autostart: bool = True,
        timeout: float | None = None,
        claims: dict[str, str] | None = None,
        on_warnings: Callable[[list[str]], None] | None = None,
    ) -> None:
        self.settings = settings
        # inside a `tenantry agent` sandbox the session socket is the only daemon
        self.autostart = autostart and os.environ.get("TENANTRY_AUTOSTART") != "0"
        self.timeout = timeout
        self.claims = claims if claims is not None else client_claims()
        # warnings (budget thresholds, policy notes) that came with the last result
        self.last_warnings: list[str] = []
        self.on_warnings = on_warnings
        self._conn = wire.Connection(settings.socket, timeout)
        self._held = HeldEnv()

    def close(self) -> None:
        self._conn.close()

    # -- transport -----------------------------------------------------------------
    def _request(
        self,
        method: str,
        path: str,
        body: Any = None,
        timeout: float | None = None,
        request_id: str = "",
    ) -> tuple[wire.Head, Iterator[wire.Head | bytes]]:
        payload = fastjson.dumps(body).encode() if body is not None else b""
        headers = {
            PRINCIPAL_HEADER: fastjson.dumps(self.claims),
            REQUEST_ID_HEADER: request_id or new_request_id(),
        }
        data = wire.encode_request(method, path, payload, headers)
        last: Exception | None = None
        for attempt in range(2):
            try:
                events = self._conn.request(data, timeout or self.timeout)
                head = next(events)
                assert isinstance(head, wire.Head)
                return head, events
            except (FileNotFoundError, NotADirectoryError, ConnectionRefusedError) as exc:
                last = exc
                if attempt == 0 and self.autostart:
                    ensure_daemon(self.settings)
                    continue
                break
            except PermissionError as exc:
                raise errors.PermissionDenied(
                    f"cannot open the daemon socket {self.settings.socket}: {exc.strerror}",
                    hint="the socket belongs to another user; set TENANTRY_SOCKET to your own",
                ) from exc
            except (OSError, wire.WireError, StopIteration) as exc:
                self._conn.close()
                raise errors.DaemonUnavailable(f"lost the connection to the daemon: {exc}") from exc
        raise errors.DaemonUnavailable(
            f"no daemon answers on {self.settings.socket}",
            hint="start one with `tenantry serve` (or let the CLI start it)",
        ) from last

    def call(
        self,
        op: str,
        params: dict[str, Any] | None = None,
        *,
        request_id: str = "",
        **kw: Any,
    ) -> Any:
        """Call one op; returns its result or raises its TenantryError.

        The request carries one request id on every attempt; ops in
        ``RETRY_AFTER_LOSS`` are retried when the connection is lost.
        """
        rid = request_id or new_request_id()
        retries = RETRIES if op in RETRY_AFTER_LOSS else 0
        attempt = 0
        while True:
            try:
                head, events = self._request(
                    "POST", f"{API}/op/{op}", params or {}, request_id=rid, **kw
                )
                data = _read_json(head, events)
                break
            except errors.DaemonUnavailable:
                if attempt >= retries:
                    raise
                attempt += 1
                time.sleep(0.1 * 2**attempt)  # let a restarting daemon come up
        if not data.get("ok"):
            raise errors.from_dict(data.get("error") or {})
        self.last_warnings = list(data.get("warnings") or [])
        if self.last_warnings and self.on_warnings is not None:
            self.on_warnings(self.last_warnings)
        return data.get("result")

    def stream(self, op: str, params: dict[str, Any] | None = None) -> Iterator[dict[str, Any]]:
        """Call a streaming op; yields its chunks (the last holds ``result``)."""
        sent, whole = self._held.params(params or {})
        head, events = self._request("POST", f"{API}/op/{op}", sent)
        if head.content_type.startswith("application/json"):
            last = self._held.answer(_read_json(head, events), whole)
            if last is None:
                yield from self.stream(op, params)
            else:
                yield last
            return
        self._held.accepted(whole)
        lines = wire.Lines()
        try:
            for event in events:
                if isinstance(event, bytes):
                    for line in lines.feed(event):
                        chunk = fastjson.loads(line)
                        if "error" in chunk:
                            raise errors.from_dict(chunk["error"])
                        yield chunk
        except (OSError, wire.WireError) as exc:
            raise errors.DaemonUnavailable(f"lost the connection to the daemon: {exc}") from exc
        for line in lines.close():
            yield fastjson.loads(line)

    def health(self) -> dict[str, Any]:
        head, events = self._request("GET", f"{API}/health")
        return dict(_read_json(head, events))


def _read_json(head: wire.Head, events: Iterator[wire.Head | bytes]) -> dict[str, Any]:
    try:
        raw = b"".join(e for e in events if isinstance(e, bytes))
    except (OSError, wire.WireError) as exc:
        raise errors.DaemonUnavailable(f"lost the connection to the daemon: {exc}") from exc
    try:
        data = fastjson.loads(raw)
    except ValueError as exc:
        raise errors.DaemonUnavailable(
            f"the daemon sent a response that is not JSON (HTTP {head.status})"
        ) from exc
    if not isinstance(data, dict):
        raise errors.DaemonUnavailable("the daemon sent an unexpected response")
    return data


def socket_answers(path: str) -> bool:
    """True when something accepts connections on the Unix socket ``path``."""
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(1.0)
        sock.connect(path)
        return True
    except OSError:
        return False
    finally:
        sock.close()


BACKEND_FILE = "backend"


def recorded_backend(state_dir: str) -> str:
    """The backend the daemon of this state directory serves ("" when none recorded).

    An autostarted daemon serves it, never silently another: a ``serve
    --backend slurm`` state restarted as ``local`` would lose track of its jobs.
    """
    from pathlib import Path

    try:
        return (Path(state_dir) / BACKEND_FILE).read_text().strip()
    except OSError:
        return ""


def starting_daemon(state: Path) -> int:
    """The pid of a live daemon that holds ``state`` (it wrote it into the lock), or 0."""
    try:
        pid = int((state / "daemon.lock").read_text().strip() or 0)
        if pid > 0:
            os.kill(pid, 0)
            return pid
    except (OSError, ValueError):
        pass
    return 0


def _await_socket(path: str, deadline: float, failed: Callable[[], bool]) -> bool:
    """Poll until the socket answers (True), ``failed()`` says stop, or the deadline passes."""
    delay = 0.005
    while time.monotonic() < deadline:
        if socket_answers(path):
            return True
        if failed():
            return False
        time.sleep(delay)
        delay = min(delay * 2, 0.1)
    return False


def ensure_daemon(settings: Settings, wait_s: float = 15.0) -> None:
    """Start a daemon for these settings unless one answers; never two at once."""
    import contextlib
    import fcntl
    import subprocess
    import sys
    from pathlib import Path

    state = Path(settings.state_dir)
    try:
        state.mkdir(parents=True, exist_ok=True, mode=0o700)
        lock = (state / "spawn.lock").open("a")
    except OSError as exc:
        raise errors.UsageError(
            f"cannot use the state directory {state}: {exc.strerror or exc}",
            hint="point TENANTRY_STATE_DIR (or --state-dir) at a directory you can write",
        ) from exc
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if socket_answers(settings.socket):
            return
        deadline = time.monotonic() + wait_s
        if starting_daemon(state) and _await_socket(settings.socket, deadline, lambda: False):
            return  # one is starting (a client before us gave up waiting for it): use it
        log = (state / "daemon.log").open("ab")
        os.chmod(state / "daemon.log", 0o600)
        cmd = [
            sys.executable,
            "-m",
            "tenantry",
            "--socket",
            settings.socket,
            "--state-dir",
            settings.state_dir,
            "serve",
            "--backend",
            recorded_backend(settings.state_dir) or settings.backend,
        ]
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
            close_fds=True,
        )
        log.close()
        # ours may exit at once because another holds the state (``take_lock``): wait for that one
        if _await_socket(
            settings.socket,
            deadline,
            lambda: proc.poll() is not None and starting_daemon(state) in (0, proc.pid),
        ):
            return
        tail = ""
        with contextlib.suppress(OSError):
            tail = (state / "daemon.log").read_text()[-600:]
        raise errors.DaemonUnavailable(
            "the daemon did not start",
            hint=f"see {state / 'daemon.log'}: {tail.strip()[-300:] if tail else 'empty'}",
        )
