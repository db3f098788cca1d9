"""The pilot wire protocol: versioned, newline-delimited JSON over TCP.

One message is one JSON object on one line (UTF-8, at most ``MAX_LINE``
bytes), always carrying ``"v"`` (protocol version) and ``"t"`` (its type).
Bytes (command output) travel base64-encoded. Never pickle: a message is plain
data that both sides validate before acting on it. Unknown fields are ignored
(a newer peer may add some); an unknown type or version is an error.

    pilot                                   daemon
      hello(lease, nonce, slots, ...)   ->
                                        <-  welcome(nonce', proof_d) | reject(reason)
      auth(proof_p)                     ->
                                        <-  reject(reason)              (bad proof)
      replay(results finished offline)  ->                  (after a reconnect)
                                        <-  ack(ids)
                                        <-  env(id, env)   (once per environment)
                                        <-  run(id, argv, cwd, env | env_id, timeout_s)
      output(id, stream, data)*         ->
      exit(id, state, code, cpu, rss)   ->
                                        <-  ack(ids)
      heartbeat                        <->  heartbeat
                                        <-  cancel(id) | drain | release
      drain (walltime near, notice)     ->

Authentication is mutual and the secret never travels: both sides hold
``key = sha256(secret)``; the daemon proves it with
``HMAC(key, "daemon", lease, nonce, nonce')`` in its welcome (a pilot never
runs commands for a process that merely squats on the daemon's port), and the
pilot answers with ``HMAC(key, "pilot", lease, nonce', nonce)``. From then on
the link is *sealed* (``seal``): every message carries a counter ``n`` and a
``mac`` keyed with ``HMAC(key, "link", lease, nonce, nonce')`` over the
sender's role, the counter and the message, so a message injected, replayed,
reordered or reflected by anyone without the lease key is refused, for the
whole connection and not only the handshake. (Only a ``reject`` may arrive
unsealed: it just ends the connection.) Messages are not encrypted: on a
network that is not trusted, tunnel the link.

``encode``/``decode`` are pure; ``recv``/``send`` are the thin stream edge.
Standard library only: the pilot runs inside allocations with no extra packages.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
import json
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from tenantry.core.errors import PilotProtocolError

VERSION = 1
MAX_LINE = 8 * 1024 * 1024

STREAMS = ("stdout", "stderr")
ENVS_KEPT = 64  # environments each side of a link keeps (see Env)
# How a command ended on the pilot. ``refused``: never started (the pilot is
# draining or full), so the daemon may send it elsewhere whatever its idempotence.
EXIT_STATES = ("completed", "failed", "timeout", "cancelled", "refused", "error")


@dataclass(frozen=True, slots=True)
class Hello:
    """Pilot -> daemon, first message of every connection."""

    t: ClassVar[str] = "hello"
    lease: str
    nonce: str
    slots: int
    walltime_end: float  # unix time at which the allocation ends
    host: str
    pid: int
    running: tuple[str, ...] = ()  # commands still running (after a reconnect)
    finished: tuple[str, ...] = ()  # commands ended but not yet acked (replay follows)
    draining: bool = False


@dataclass(frozen=True, slots=True)
class Welcome:
    """Daemon -> pilot: its own nonce and its proof of the lease key."""

    t: ClassVar[str] = "welcome"
    heartbeat_s: float
    nonce: str
    proof: str


@dataclass(frozen=True, slots=True)
class Auth:
    """Pilot -> daemon: the pilot's proof of the lease key."""

    t: ClassVar[str] = "auth"
    proof: str


@dataclass(frozen=True, slots=True)
class Reject:
    t: ClassVar[str] = "reject"
    reason: str


@dataclass(frozen=True, slots=True)
class Heartbeat:
    t: ClassVar[str] = "heartbeat"
    ts: float
    running: int = 0


@dataclass(frozen=True, slots=True)
class Run:
    t: ClassVar[str] = "run"
    id: str
    argv: tuple[str, ...]
    cwd: str
    env: dict[str, str] = field(default_factory=dict)  # non-empty: the whole environment
    timeout_s: float | None = None
    # non-empty: the environment an ``env`` message named so (``env`` is then empty)
    env_id: str = ""


@dataclass(frozen=True, slots=True)
class Env:
    """Daemon -> pilot: an environment later runs name by ``id`` (its digest).

    Each side keeps the last ``ENVS_KEPT`` it sent or received, in the order
    sent (first in, first out), so both drop the same ones.
    """

    t: ClassVar[str] = "env"
    id: str
    env: dict[str, str]


@dataclass(frozen=True, slots=True)
class Output:
    t: ClassVar[str] = "output"
    id: str
    stream: str
    data: bytes


@dataclass(frozen=True, slots=True)
class Exit:
    """How one command ended. In a replay it also carries the output not yet sent."""

    t: ClassVar[str] = "exit"
    id: str
    state: str
    code: int | None
    cpu_s: float = 0.0
    max_rss_kb: int = 0
    duration_s: float = 0.0
    reason: str = ""
    stdout: bytes = b""
    stderr: bytes = b""
    truncated: bool = False


@dataclass(frozen=True, slots=True)
class Cancel:
    t: ClassVar[str] = "cancel"
    id: str


@dataclass(frozen=True, slots=True)
class Drain:
    """Accept nothing new; finish what runs (daemon -> pilot; pilot -> daemon as notice)."""

    t: ClassVar[str] = "drain"
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Release:
    """Daemon -> pilot: finish what runs, then exit."""

    t: ClassVar[str] = "release"
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Ack:
    """Daemon -> pilot: these results are safe; forget them."""

    t: ClassVar[str] = "ack"
    ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Replay:
    """Pilot -> daemon after a reconnect: results of commands that ended offline."""

    t: ClassVar[str] = "replay"
    results: tuple[Exit, ...]


Message = (
    Hello
    | Welcome
    | Auth
    | Reject
    | Heartbeat
    | Run
    | Env
    | Output
    | Exit
    | Cancel
    | Drain
    | Release
    | Ack
    | Replay
)


# -- authentication ------------------------------------------------------------------


def key_of(secret: str) -> bytes:
    """The HMAC key both sides hold (the daemon stores only this, hex-encoded)."""
    return hashlib.sha256(secret.encode()).digest()


def proof(key: bytes, role: str, lease: str, first: str, second: str) -> str:
    """``role``'s proof of ``key`` bound to this lease and both nonces."""
    msg = "\n".join((role, lease, first, second)).encode()
    return hmac.new(key, msg, hashlib.sha256).hexdigest()


def check(key: bytes, role: str, lease: str, first: str, second: str, given: str) -> bool:
    return hmac.compare_digest(proof(key, role, lease, first, second), given)


# -- encoding -----------------------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


# fields a message leaves out while they are empty (an exit's output is sent apart)
_SPARSE: dict[type, frozenset[str]] = {
    Exit: frozenset({"reason", "stdout", "stderr", "truncated"}),
    Run: frozenset({"env_id"}),
}


_NAMES: dict[type, tuple[str, ...]] = {}  # field names of each message type, looked up once


def to_dict(msg: Message) -> dict[str, Any]:
    """The JSON object of a message (without version and type): bytes in base64,
    tuples as lists, a replay's results as exit objects."""
    if isinstance(msg, Replay):
        return {"results": [to_dict(r) for r in msg.results]}
    kind = type(msg)
    names = _NAMES.get(kind)
    if names is None:
        names = _NAMES[kind] = tuple(f.name for f in fields(msg))
    sparse = _SPARSE.get(kind, frozenset())
    d: dict[str, Any] = {}
    for name in names:
        value = getattr(msg, name)
        if name in sparse and not value:
            continue
        if isinstance(value, bytes):
            value = _b64(value)
        elif isinstance(value, tuple):
            value = list(value)
        d[name] = value
    return d


def encode(msg: Message) -> bytes:
    """One message as one line of JSON, newline included."""
    return _line(msg.t, {"v": VERSION, "t": msg.t, **to_dict(msg)})


def _line(t: str, body: dict[str, Any]) -> bytes:
    line = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    if len(line) >= MAX_LINE:
        raise PilotProtocolError(f"{t} message of {len(line)} bytes exceeds {MAX_LINE}")
    return line + b"\n"


# -- decoding (validating) ----------------------------------------------------------


def _bad(t: str, name: str, want: str) -> PilotProtocolError:
    return PilotProtocolError(f"{t} message: field {name!r} must be {want}")


def _str(d: dict[str, Any], t: str, name: str, default: str | None = None) -> str:
    v = d.get(name, default)
    if not isinstance(v, str):
        raise _bad(t, name, "a string")
    return v


def _int(d: dict[str, Any], t: str, name: str, default: int | None = None) -> int:
    v = d.get(name, default)
    if not isinstance(v, int) or isinstance(v, bool):
        raise _bad(t, name, "an integer")
    return v


def _opt_int(d: dict[str, Any], t: str, name: str) -> int | None:
    return None if d.get(name) is None else _int(d, t, name)


def _float(d: dict[str, Any], t: str, name: str, default: float | None = None) -> float:
    v = d.get(name, default)
    if not isinstance(v, int | float) or isinstance(v, bool) or v != v:
        raise _bad(t, name, "a number")
    return float(v)


def _opt_float(d: dict[str, Any], t: str, name: str) -> float | None:
    return None if d.get(name) is None else _float(d, t, name)


def _bool(d: dict[str, Any], t: str, name: str) -> bool:
    v = d.get(name, False)
    if not isinstance(v, bool):
        raise _bad(t, name, "a boolean")
    return v


def _strs(d: dict[str, Any], t: str, name: str, *, nonempty: bool = False) -> tuple[str, ...]:
    v = d.get(name, [])
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v) or (nonempty and not v):
        raise _bad(t, name, "a non-empty list of strings" if nonempty else "a list of strings")
    return tuple(v)


def _env(d: dict[str, Any], t: str, name: str) -> dict[str, str]:
    v = d.get(name, {})
    if not isinstance(v, dict) or not all(
        isinstance(k, str) and isinstance(x, str) and k and "=" not in k and "\0" not in x
        for k, x in v.items()
    ):
        raise _bad(t, name, "an object of string names (no '=') to string values")
    return dict(v)


def _bytes(d: dict[str, Any], t: str, name: str) -> bytes:
    v = d.get(name, "")
    if not isinstance(v, str):
        raise _bad(t, name, "base64 text")
    try:
        return base64.b64decode(v, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise _bad(t, name, "base64 text") from exc


def _choice(d: dict[str, Any], t: str, name: str, allowed: tuple[str, ...]) -> str:
    v = _str(d, t, name)
    if v not in allowed:
        raise _bad(t, name, "one of " + "|".join(allowed))
    return v


def _exit(d: dict[str, Any], t: str = "exit") -> Exit:
    return Exit(
        id=_str(d, t, "id"),
        state=_choice(d, t, "state", EXIT_STATES),
        code=_opt_int(d, t, "code"),
        cpu_s=_float(d, t, "cpu_s", 0.0),
        max_rss_kb=_int(d, t, "max_rss_kb", 0),
        duration_s=_float(d, t, "duration_s", 0.0),
        reason=_str(d, t, "reason", ""),
        stdout=_bytes(d, t, "stdout"),
        stderr=_bytes(d, t, "stderr"),
        truncated=_bool(d, t, "truncated"),
    )


def _run(d: dict[str, Any]) -> Run:
    """A ``run``; a well-framed one whose fields cannot be run (a NUL in argv...)
    raises a PilotProtocolError naming the command (``details["command_id"]``):
    the receiver fails that one command and keeps the link, so one bad request
    never wedges a lease."""
    cid = d.get("id")
    if not isinstance(cid, str) or not cid:
        raise _bad("run", "id", "a non-empty string")
    try:
        return _run_fields(d, cid)
    except PilotProtocolError as exc:
        raise PilotProtocolError(exc.message, command_id=cid) from exc


def _run_fields(d: dict[str, Any], cid: str) -> Run:
    timeout = _opt_float(d, "run", "timeout_s")
    if timeout is not None and timeout <= 0:
        raise _bad("run", "timeout_s", "a positive number")
    argv = _strs(d, "run", "argv", nonempty=True)
    if any("\0" in a for a in argv):
        raise _bad("run", "argv", "free of NUL bytes")
    return Run(
        id=cid,
        argv=argv,
        cwd=_str(d, "run", "cwd"),
        env=_env(d, "run", "env"),
        timeout_s=timeout,
        env_id=_str(d, "run", "env_id", ""),
    )


def _replay(d: dict[str, Any]) -> Replay:
    results = d.get("results")
    if not isinstance(results, list) or not all(isinstance(r, dict) for r in results):
        raise _bad("replay", "results", "a list of exit objects")
    return Replay(results=tuple(_exit(r, "replay") for r in results))


def from_dict(d: dict[str, Any]) -> Message:
    """Validate a decoded JSON object and build its message."""
    version = d.get("v")
    if version != VERSION:
        raise PilotProtocolError(
            f"unsupported pilot protocol version {version!r} (this side speaks {VERSION})",
            hint="run the same Tenantry version for the daemon and its pilots",
        )
    t = d.get("t")
    if t == "hello":
        return Hello(
            lease=_str(d, t, "lease"),
            nonce=_str(d, t, "nonce"),
            slots=_int(d, t, "slots"),
            walltime_end=_float(d, t, "walltime_end"),
            host=_str(d, t, "host"),
            pid=_int(d, t, "pid"),
            running=_strs(d, t, "running"),
            finished=_strs(d, t, "finished"),
            draining=_bool(d, t, "draining"),
        )
    if t == "welcome":
        return Welcome(
            heartbeat_s=_float(d, t, "heartbeat_s"),
            nonce=_str(d, t, "nonce"),
            proof=_str(d, t, "proof"),
        )
    if t == "auth":
        return Auth(proof=_str(d, t, "proof"))
    if t == "reject":
        return Reject(reason=_str(d, t, "reason"))
    if t == "heartbeat":
        return Heartbeat(ts=_float(d, t, "ts"), running=_int(d, t, "running", 0))
    if t == "run":
        return _run(d)
    if t == "env":
        return Env(id=_str(d, t, "id"), env=_env(d, t, "env"))
    if t == "output":
        return Output(
            id=_str(d, t, "id"), stream=_choice(d, t, "stream", STREAMS), data=_bytes(d, t, "data")
        )
    if t == "exit":
        return _exit(d)
    if t == "cancel":
        return Cancel(id=_str(d, t, "id"))
    if t == "drain":
        return Drain(reason=_str(d, t, "reason", ""))
    if t == "release":
        return Release(reason=_str(d, t, "reason", ""))
    if t == "ack":
        return Ack(ids=_strs(d, t, "ids"))
    if t == "replay":
        return _replay(d)
    raise PilotProtocolError(f"unknown pilot message type {t!r}")


def decode(line: bytes) -> Message:
    """Parse and validate one line (with or without its newline)."""
    if len(line) > MAX_LINE:
        raise PilotProtocolError(f"message of {len(line)} bytes exceeds {MAX_LINE}")
    return from_dict(_object(line))


def _object(line: bytes) -> dict[str, Any]:
    try:
        d = json.loads(line)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PilotProtocolError(f"pilot message is not JSON: {exc}") from exc
    if not isinstance(d, dict):
        raise PilotProtocolError("pilot message must be a JSON object")
    return d


# -- sealed links (every message authenticated) ---------------------------------------


class Seal:
    """One direction pair of a sealed link: counters and the link key."""

    __slots__ = ("key", "me", "peer", "recv_n", "send_n")

    def __init__(self, key: bytes, me: str, peer: str) -> None:
        self.key, self.me, self.peer = key, me, peer
        self.send_n = 0
        self.recv_n = 0

    def mac(self, role: str, body: dict[str, Any]) -> str:
        return self._mac(role, _canonical(body))

    def _mac(self, role: str, text: bytes) -> str:
        return hmac.digest(self.key, _ROLES[role] + text, "sha256").hex()

    def close(self, msg: Message) -> bytes:
        self.send_n += 1
        body = {"v": VERSION, "t": msg.t, **to_dict(msg), "n": self.send_n}
        # encoded once: the line is the MAC'd text with the MAC appended
        text = _canonical(body)
        line = text[:-1] + b',"mac":"' + self._mac(self.me, text).encode() + b'"}\n'
        if len(line) > MAX_LINE:
            raise PilotProtocolError(f"{msg.t} message of {len(line) - 1} bytes exceeds {MAX_LINE}")
        return line

    def open(self, line: bytes) -> Message:
        d = self._opened(line)
        if d is not None:  # the MAC checked on the bytes as sent (the usual case)
            if d.get("n") != self.recv_n + 1:
                raise PilotProtocolError("pilot-link message out of order or replayed")
            self.recv_n += 1
            return from_dict(d)
        d = _object(line)
        given = d.pop("mac", None)
        if given is None and d.get("t") == "reject":
            return from_dict(d)
        if not isinstance(given, str) or not hmac.compare_digest(given, self.mac(self.peer, d)):
            raise PilotProtocolError("unauthenticated pilot-link message (bad or missing MAC)")
        if d.get("n") != self.recv_n + 1:
            raise PilotProtocolError("pilot-link message out of order or replayed")
        self.recv_n += 1
        return from_dict(d)

    def _opened(self, line: bytes) -> dict[str, Any] | None:
        """The body of a line as ``close`` builds it, if its MAC is right; else None.

        ``close`` appends ``,"mac":"<hex>"}`` to the MAC'd text less its closing
        brace: that text is checked as it came, then parsed, with no re-encoding.
        """
        body = line.rstrip(b"\n")
        cut = len(body) - _MAC_TAIL
        if cut <= 0 or body[cut : cut + 8] != b',"mac":"' or body[-2:] != b'"}':
            return None
        text = body[:cut] + b"}"
        given = body[cut + 8 : -2]
        if not hmac.compare_digest(given, self._mac(self.peer, text).encode()):
            return None
        return _object(text)


_ROLES = {"daemon": b"daemon\n", "pilot": b"pilot\n"}  # what each side's MACs begin with

# ``,"mac":"`` + 64 hex digits + ``"}``
_MAC_TAIL = 8 + 64 + 2


def _canonical(body: dict[str, Any]) -> bytes:
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def link_key(key: bytes, lease: str, pilot_nonce: str, daemon_nonce: str) -> bytes:
    msg = "\n".join(("link", lease, pilot_nonce, daemon_nonce)).encode()
    return hmac.new(key, msg, hashlib.sha256).digest()


_SEALS: dict[int, tuple[Any, Seal]] = {}
_OUTBOXES: dict[int, Outbox] = {}

ACK_IDS = 4096  # command ids per ack message


class Outbox:
    """What one end of a sealed link sends: each message sealed when it is sent (in
    order; an error such as an oversized message raises there), and every line of
    one turn of the event loop written together, with the acks of that turn as one
    ``ack`` message. A burst costs one write and one segment per turn, not one per
    run, exit and ack."""

    __slots__ = ("_acks", "_lines", "_loop", "_seal", "_soon", "writer")

    def __init__(self, writer: asyncio.StreamWriter, sealed: Seal) -> None:
        self.writer = writer
        self._seal = sealed
        self._lines: list[bytes] = []
        self._acks: list[str] = []
        self._soon = False
        self._loop = asyncio.get_running_loop()

    def post(self, msg: Message) -> None:
        self._lines.append(self._seal.close(msg))
        self._schedule()

    def ack(self, cid: str) -> None:
        self._acks.append(cid)
        self._schedule()

    def _schedule(self) -> None:
        if not self._soon:
            self._soon = True
            self._loop.call_soon(self.flush)

    def flush(self) -> None:
        """Write what is queued now (also at the end of the turn it was queued in)."""
        self._soon = False
        acks, self._acks = self._acks, []
        for i in range(0, len(acks), ACK_IDS):
            self._lines.append(self._seal.close(Ack(ids=tuple(acks[i : i + ACK_IDS]))))
        lines, self._lines = self._lines, []
        if lines and not self.writer.is_closing():
            self.writer.write(b"".join(lines))


def seal(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    key: bytes,
    *,
    me: str,
    lease: str,
    pilot_nonce: str,
    daemon_nonce: str,
) -> None:
    """From now on, every message on this connection is MAC'd and checked, and what
    this end sends goes through its ``Outbox`` (written at the end of each turn)."""
    peer = "daemon" if me == "pilot" else "pilot"
    s = Seal(link_key(key, lease, pilot_nonce, daemon_nonce), me, peer)
    for end in (reader, writer):
        _SEALS[id(end)] = (end, s)
    _OUTBOXES[id(writer)] = Outbox(writer, s)


def unseal(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """The connection ends: write what is still queued, forget the seal."""
    flush(writer)
    _OUTBOXES.pop(id(writer), None)
    for end in (reader, writer):
        _SEALS.pop(id(end), None)


def _seal_of(end: Any) -> Seal | None:
    entry = _SEALS.get(id(end))
    return entry[1] if entry is not None and entry[0] is end else None


def _outbox_of(writer: asyncio.StreamWriter) -> Outbox | None:
    box = _OUTBOXES.get(id(writer))
    return box if box is not None and box.writer is writer else None


# -- stream edge --------------------------------------------------------------------


async def recv(reader: asyncio.StreamReader) -> Message | None:
    """The next message, or None at end of stream."""
    try:
        line = await reader.readuntil(b"\n")
    except asyncio.IncompleteReadError as exc:
        if exc.partial.strip():
            raise PilotProtocolError("connection closed inside a message") from exc
        return None
    except asyncio.LimitOverrunError as exc:
        raise PilotProtocolError(f"message exceeds {MAX_LINE} bytes") from exc
    if len(line) > MAX_LINE:
        raise PilotProtocolError(f"message of {len(line)} bytes exceeds {MAX_LINE}")
    sealed = _seal_of(reader)
    return sealed.open(line) if sealed is not None else decode(line)


def send(writer: asyncio.StreamWriter, msg: Message) -> None:
    """Send one message: before the seal, written at once (the caller drains the
    writer); on a sealed link, queued on its outbox and written at the end of this
    turn of the loop with the others (``flush`` writes them now)."""
    box = _outbox_of(writer)
    if box is not None:
        box.post(msg)
    else:
        writer.write(encode(msg))


def ack(writer: asyncio.StreamWriter, cid: str) -> None:
    """Acknowledge a result on a sealed link: this turn's acks go as one message."""
    box = _outbox_of(writer)
    if box is None:
        raise PilotProtocolError("acks travel only on a sealed pilot link")
    box.ack(cid)


def flush(writer: asyncio.StreamWriter) -> None:
    """Write what a sealed link's outbox holds now (before closing the writer)."""
    box = _outbox_of(writer)
    if box is not None:
        box.flush()
