"""The audit log file format: an append-only, hash-chained JSON-lines file.

Each line is one record::

    {"seq": 7, "ts": 1764543600.1, "principal": "alice/codex/s1",
     "action": "command.finished", "subject": "c-12", "decision": "completed",
     "rule": "", "input_digest": "sha256:...", "prev": "<hash of seq 6>",
     "hash": "<hash of this record>"}

``hash`` is HMAC-SHA256 (keyed, ``alg = hmac-sha256``) or SHA-256 (``sha256``)
over the canonical JSON of the record without ``hash``. The first record's
``prev`` is 64 zeros. The *anchor* (``audit.head``, a separate file) holds the
last ``seq`` and ``hash``; it is rewritten atomically after every append, so a
truncated log (fewer records than the anchor says) is detected, as is any
edit, deletion, insertion or reordering (a broken chain). Pure functions plus
one small synchronous writer; the component runs it off the event loop.

Group commit: a batch of records costs one write and one ``fsync`` of the
log. After every batch the anchor is rewritten in place (one ``pwrite`` of a
fixed-size block, after the log's ``fsync``, so it never names a record that
is not durable), which survives a crash of the daemon; at most every
``HEAD_SYNC_S`` and on close it is replaced whole (temp file, ``fsync``,
rename), so after a power loss it may lag the log by that window -- records
past the anchor read as "in flight", never as tampering, and the writer
resumes after them.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tenantry.core.fds import close_quietly
from tenantry.core.models import FieldsDict

GENESIS = "0" * 64
LOG_NAME = "audit.jsonl"
HEAD_NAME = "audit.head"
KEY_NAME = "audit.key"
HEAD_SYNC_S = 0.5  # the anchor's fsync, at most this often (the log's: every batch)
HEAD_SIZE = 512  # the anchor's block, rewritten in place: one sector


def canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str).encode()


def digest(obj: Any) -> str:
    """``sha256:<hex>`` of the canonical JSON of ``obj`` (inputs are never stored)."""
    return "sha256:" + hashlib.sha256(canonical(obj)).hexdigest()


def record_hash(record: dict[str, Any], key: bytes | None) -> str:
    return _hash_of(canonical({k: v for k, v in record.items() if k != "hash"}), key)


def _hash_of(body: bytes, key: bytes | None) -> str:
    if key:
        return hmac.digest(key, body, "sha256").hex()  # one C call (hmac.new builds objects)
    return hashlib.sha256(body).hexdigest()


def alg(key: bytes | None) -> str:
    return "hmac-sha256" if key else "sha256"


def load_key(path: Path, *, create: bool) -> bytes | None:
    """The HMAC key at ``path``; created (0600) when asked and missing."""
    try:
        return bytes.fromhex(path.read_text().strip())
    except FileNotFoundError:
        if not create:
            return None
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(os.urandom(32).hex() + "\n")
    return bytes.fromhex(path.read_text().strip())


def anchor_mac(key: bytes, seq: int, last: str) -> str:
    """The keyed MAC of an anchor: rewriting ``audit.head`` needs the key."""
    body = canonical({"anchor": "tenantry-audit", "seq": seq, "hash": last})
    return hmac.new(key, body, hashlib.sha256).hexdigest()


WRITE_FAILED = "audit.write_failed"


def read_head(directory: Path) -> dict[str, Any] | None:
    data: Any = None
    for _attempt in range(3):  # a read racing the writer's in-place rewrite: read again
        try:
            data = json.loads((directory / HEAD_NAME).read_text())
            break
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            data = None
    if data is None:
        return {"seq": -1, "hash": "", "alg": "", "corrupt": True}
    return data if isinstance(data, dict) else {"seq": -1, "hash": "", "corrupt": True}


def iter_records(directory: Path) -> Iterator[tuple[int, dict[str, Any] | None, str]]:
    """(line number, record or None when unparsable, raw line) for each line."""
    try:
        fh = (directory / LOG_NAME).open(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return
    with fh:
        for n, raw in enumerate(fh, 1):
            line = raw.rstrip("\n")
            try:
                rec = json.loads(line)
            except ValueError:
                yield n, None, line
                continue
            yield n, rec if isinstance(rec, dict) else None, line


class ChainWriter:
    """Appends records to ``<dir>/audit.jsonl`` and keeps the anchor current."""

    def __init__(self, directory: Path, key: bytes | None) -> None:
        self.dir = directory
        self.key = key
        self.seq = 0
        self.prev = GENESIS
        self._fd: int | None = None
        # set after a failed write until the next successful one
        self.failure: dict[str, Any] | None = None
        self.on_anchor: Callable[[int, str, str], None] | None = None
        self._head_synced = 0.0  # monotonic time of the anchor's last fsync
        self._head_fd: int | None = None  # the anchor file, rewritten in place between syncs
        # (file size, seq, hash, records, failure) before the last write, until its sync
        self._unsynced: tuple[int, int, str, int, dict[str, Any] | None] | None = None

    def open(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._fd = os.open(self.dir / LOG_NAME, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        head = read_head(self.dir)
        last: dict[str, Any] | None = None
        for _n, rec, _raw in iter_records(self.dir):
            if rec is not None:
                last = rec
        # Resume from the anchor when there is one, so a truncated log stays
        # detectably broken instead of being silently continued.
        head_seq = int(head.get("seq", 0)) if head and not head.get("corrupt") else 0
        last_seq = int(last.get("seq", 0)) if last is not None else 0
        if last is not None and last_seq > head_seq:
            # records written just before a crash, ahead of the anchor: continue after them
            self.seq, self.prev = last_seq, str(last.get("hash", GENESIS))
        elif head_seq > 0:
            assert head is not None
            self.seq, self.prev = head_seq, str(head["hash"])
        elif last is not None:
            self.seq, self.prev = int(last.get("seq", 0)), str(last.get("hash", GENESIS))

    def append(self, fields: dict[str, Any], *, fsync: bool = True) -> dict[str, Any]:
        return self.append_many([fields], fsync=fsync)[0]

    def append_many(
        self, batch: list[dict[str, Any]], *, fsync: bool = True
    ) -> list[dict[str, Any]]:
        """Append records in order with one write, one fsync and one anchor update."""
        out = self.write_many(batch)
        self.sync(fsync=fsync)
        return out

    def write_many(self, batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Write records in order with one ``write`` (in the page cache: they survive
        the daemon being killed); ``sync()`` makes them durable and moves the anchor."""
        if self._fd is None:
            raise RuntimeError("audit log is not open")
        if self._unsynced is not None:
            raise RuntimeError("audit records written but not synced")
        out: list[dict[str, Any]] = []
        lines: list[bytes] = []
        seq, prev = self.seq, self.prev
        prepended = self.failure is not None
        if prepended:
            # the first record after a failed write says what could not be written,
            # so `verify` tells a write failure from tampering
            batch = [self.failure_record(), *batch]
        for fields in batch:
            record: dict[str, Any] = {"seq": seq + 1, "ts": round(time.time(), 6)}
            record.update(fields)
            record.pop("hash", None)
            record["prev"] = prev
            body = canonical(record)
            record["hash"] = _hash_of(body, self.key)
            seq, prev = record["seq"], record["hash"]
            out.append(record)
            # the line is the hashed body with the hash last (one encoding per record)
            lines.append(body[:-1] + b',"hash":"' + record["hash"].encode() + b'"}\n')
        data = b"".join(lines)
        size = os.lseek(self._fd, 0, os.SEEK_END)
        lost = len(batch) - (1 if prepended else 0)
        try:
            written = os.write(self._fd, data)
            if written != len(data):
                raise OSError(28, "short write to the audit log")
        except OSError as exc:
            self._undo(size, lost, exc)
            raise
        self._unsynced = (size, self.seq, self.prev, lost, self.failure)
        self.failure = None
        self.seq, self.prev = seq, prev
        return out[1:] if prepended else out

    def sync(self, *, fsync: bool = True) -> None:
        """Make the written records durable (one ``fsync``), then move the anchor."""
        if self._fd is None or self._unsynced is None:
            return
        size, seq, prev, lost, failure = self._unsynced
        self._unsynced = None
        if fsync:
            try:
                os.fsync(self._fd)
            except OSError as exc:
                self.seq, self.prev, self.failure = seq, prev, failure
                self._undo(size, lost, exc)
                raise
        with contextlib.suppress(OSError):  # records durable; the next batch rewrites it
            self._write_head(fsync=fsync)
        if self.on_anchor is not None:
            self.on_anchor(self.seq, self.prev, self.head_mac())

    def _undo(self, size: int, lost: int, exc: OSError) -> None:
        """Put the file back as it was (a torn line would read as tampering) and
        remember the failure for the record that follows it."""
        assert self._fd is not None
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, size)
        self._note_failure(lost, exc)

    def _note_failure(self, lost: int, exc: OSError) -> None:
        now = round(time.time(), 6)
        if self.failure is None:
            self.failure = {"at_seq": self.seq + 1, "lost": 0, "since": now, "error": ""}
        self.failure["lost"] += lost
        self.failure["until"] = now
        self.failure["error"] = exc.strerror or str(exc)

    def failure_record(self) -> dict[str, Any]:
        f = dict(self.failure or {})
        return {
            "principal": "",
            "action": WRITE_FAILED,
            "subject": f"seq {f.get('at_seq')}",
            "decision": "refused",
            "rule": "",
            "input_digest": digest(f),
            "failure": f,
        }

    def head_mac(self) -> str:
        return anchor_mac(self.key, self.seq, self.prev) if self.key else ""

    def _head_block(self) -> bytes:
        data: dict[str, Any] = {
            "seq": self.seq,
            "hash": self.prev,
            "alg": alg(self.key),
            "updated": time.time(),
        }
        if self.key:
            data["mac"] = self.head_mac()
        raw = json.dumps(data).encode()
        return raw.ljust(HEAD_SIZE - 1) + b"\n"  # padded: each rewrite covers the last

    def _write_head(self, *, fsync: bool) -> None:
        block = self._head_block()
        now = time.monotonic()
        sync = fsync and now - self._head_synced >= HEAD_SYNC_S
        if not sync and self._head_fd is not None and len(block) == HEAD_SIZE:
            os.pwrite(self._head_fd, block, 0)
            return
        # whole: a new file renamed over the old one (atomic even across a power loss)
        tmp = self.dir / (HEAD_NAME + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)  # as open(): umask
        try:
            os.write(fd, block)
            if sync:
                os.fsync(fd)
                self._head_synced = now
        finally:
            os.close(fd)
        tmp.replace(self.dir / HEAD_NAME)
        self._close_head()
        self._head_fd = os.open(self.dir / HEAD_NAME, os.O_WRONLY)

    def _close_head(self) -> None:
        close_quietly(self._head_fd)
        self._head_fd = None

    def close(self) -> None:
        if self._fd is not None and self._head_synced:
            self._head_synced = 0.0  # the last anchor reaches the disk before we go
            with contextlib.suppress(OSError):
                self._write_head(fsync=True)
        self._close_head()
        close_quietly(self._fd)
        self._fd = None


@dataclass(slots=True)
class Report(FieldsDict):
    ok: bool
    records: int
    alg: str
    head_seq: int | None
    problems: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def verify(
    directory: Path,
    key: bytes | None,
    *,
    max_problems: int = 50,
    external: tuple[int, str] | None = None,
    expect_anchor: bool = True,
) -> Report:
    """Check every record's hash, the chain, the sequence and the (keyed) anchor.

    ``external`` is an anchor kept elsewhere (syslog/journald): ``(seq, hash)``
    that record ``seq`` must still have.
    """
    hashes: dict[int, str] = {}
    problems: list[dict[str, Any]] = []

    def problem(kind: str, line: int, message: str) -> None:
        if len(problems) < max_problems:
            problems.append({"kind": kind, "line": line, "message": message})

    head = read_head(directory)
    warnings: list[str] = []
    prev, expect_seq, count = GENESIS, 1, 0
    last_hash = GENESIS
    for n, rec, _raw in iter_records(directory):
        count += 1
        if rec is None:
            problem("unparsable", n, "line is not a JSON record")
            expect_seq += 1
            prev = ""
            continue
        seq = rec.get("seq")
        if seq != expect_seq:
            problem(
                "sequence",
                n,
                f"seq {seq} where {expect_seq} was expected"
                " (deleted, inserted or reordered records)",
            )
        if rec.get("prev") != prev:
            problem("chain", n, f"prev hash does not match record before it (seq {seq})")
        if not hmac.compare_digest(str(rec.get("hash", "")), record_hash(rec, key)):
            problem("hash", n, f"record seq {seq} was modified (hash mismatch)")
        elif rec.get("action") == WRITE_FAILED:
            raw = rec.get("failure")
            f: dict[str, Any] = raw if isinstance(raw, dict) else {}
            warnings.append(
                f"write failure at seq {f.get('at_seq', seq)}: {f.get('lost', '?')} record(s)"
                f" could not be written ({f.get('error', 'error')}); the actions were refused"
            )
        prev = str(rec.get("hash", ""))
        last_hash = prev
        if isinstance(seq, int) and external is not None and seq == external[0]:
            hashes[seq] = prev
        expect_seq = (seq + 1) if isinstance(seq, int) else expect_seq + 1
    head_seq: int | None = None
    if head is None and not count and key is not None and expect_anchor:
        problem(
            "missing",
            0,
            "the audit log and its anchor are both gone, but the audit key exists"
            " (records were written with it): the log was deleted",
        )
    if head is None:
        if count:
            problem("anchor", 0, "the anchor file audit.head is missing")
    elif head.get("corrupt"):
        problem("anchor", 0, "the anchor file audit.head is unreadable")
    else:
        head_seq = int(head.get("seq", 0))
        if head.get("alg") and head.get("alg") != alg(key):
            problem(
                "anchor",
                0,
                f"log is {head.get('alg')} but verifying with {alg(key)} (wrong or missing key)",
            )
        last_seq = expect_seq - 1
        if head_seq > last_seq:
            problem(
                "truncated", 0, f"the anchor says {head_seq} records, the log ends at {last_seq}"
            )
        elif head_seq < last_seq:
            # A valid chain past the anchor is a write in progress (or cut short by a
            # crash), not evidence of tampering: forging it needs the key.
            warnings.append(f"{last_seq - head_seq} record(s) after the anchored head (in flight)")
        elif head.get("hash") != last_hash:
            problem("anchor", 0, "the last record's hash differs from the anchored head")
        if key is not None:
            mac = str(head.get("mac", ""))
            want = anchor_mac(key, head_seq, str(head.get("hash", "")))
            if not hmac.compare_digest(mac, want):
                problem(
                    "anchor",
                    0,
                    "the anchor's MAC is wrong: audit.head was rewritten without the key",
                )
    if external is not None:
        ext_seq, ext_hash = external
        got = hashes.get(ext_seq)
        if got is None:
            problem(
                "external",
                0,
                f"the external anchor names seq {ext_seq}; the log has no such record",
            )
        elif not hmac.compare_digest(got, ext_hash):
            problem("external", 0, f"record seq {ext_seq} differs from the external anchor")
    return Report(not problems, count, alg(key), head_seq, problems, warnings)
