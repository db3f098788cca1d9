"""The main store's use-case queries: sessions, jobs, commands, events.

Jobs are journaled before they reach a backend (phase ``journaled``) and
updated after (``handed``); the daemon's restart logic reads both phases.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from tenantry.core.errors import StoreError
from tenantry.core.events import Event
from tenantry.core.models import Job, JobSpec, JobState, Principal, Resources
from tenantry.store.engine import Conn, Row, Schema, Store
from tenantry.store.sqlite import SQLiteStore

log = logging.getLogger(__name__)
SCHEMA = Schema("journal", "tenantry.store")
MAX_PENDING_EVENTS = 100_000
MAX_PENDING_TEXTS = 10_000  # running commands whose texts are kept for their end row

_JOB_COLS = (
    "id, backend, backend_id, phase, state, principal, uid, name, submitted_at, started_at,"
    " ended_at, exit_code, reason, output, error, resources_json, updated_at, cwd, nodes"
)
# the columns of _JOB_COLS a Job holds as stored (_job converts state and resources_json;
# phase is the journal's, not the Job's)
_JOB_AS_STORED = tuple(
    c for c in _JOB_COLS.split(", ") if c not in {"phase", "state", "resources_json"}
)


_REUSABLE = ",".join(f"'{s.value}'" for s in JobState if s.reusable)  # JobState.reusable


def _same(text: str) -> str:
    return text


def _redacted(value: Any, fn: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, dict):
        return {k: _redacted(v, fn) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_redacted(v, fn) for v in value]
    return value


def _clean(text: str) -> str:
    """Text every engine stores as UTF-8 (a lone surrogate or a NUL would fail the batch)."""
    return text.encode("utf-8", "replace").decode("utf-8").replace("\x00", "\ufffd")


def _dumps(data: Any) -> str:
    """JSON for a text column: lone surrogates escaped, so every row reads back."""
    return json.dumps(data, default=str, ensure_ascii=True)


def _job(row: Row) -> Job:
    return Job(
        **{c: row[c] for c in _JOB_AS_STORED},
        state=JobState(row["state"]),
        resources=Resources.from_dict(json.loads(row["resources_json"])),
    )


class Journal:
    """Jobs and commands are written synchronously (they must survive a crash).

    Telemetry (events, session last-seen counters) is written in batches off the
    request path, at most ``FLUSH_S`` after it happened; reads flush first, so
    they always see everything emitted before them. A SIGKILL can lose at most
    that window of telemetry, never a job or command record.
    """

    FLUSH_S = 0.05

    def __init__(self, store: str | Path | Store) -> None:
        # a path: the journal opens (and closes) that SQLite file; a store: shared
        self._owned = isinstance(store, str | Path)
        self.db: Store = SQLiteStore(store) if isinstance(store, str | Path) else store
        self._events: list[Event] = []
        self._touches: dict[str, tuple[int, float]] = {}
        self._known: set[str] = set()
        # a running command's redacted argv and cwd, from its start row to its end
        self._texts: dict[str, tuple[str, str]] = {}
        self._flush_task: asyncio.Task[None] | None = None
        self._flush_lock = asyncio.Lock()
        # applied to every text stored from a request (argv, output tails, event
        # data): the daemon wires the secret redactor in (nothing in clear at rest)
        self.redact: Callable[[str], str] = _same

    async def start(self) -> None:
        if self._owned:
            await self.db.start()
        await self.db.migrate(SCHEMA)

    async def aclose(self) -> None:
        await self.flush()
        if self._owned:
            await self.db.aclose()

    def _schedule_flush(self) -> None:
        if self._flush_task is None or self._flush_task.done():
            self._flush_task = asyncio.get_running_loop().create_task(self._flush_later())

    async def _flush_later(self) -> None:
        await asyncio.sleep(self.FLUSH_S)
        try:
            await self.flush()
        except StoreError as exc:
            # telemetry waits in memory (bounded) until the disk has room again
            log.warning("events not written yet: %s", exc.message)

    async def flush(self) -> None:
        """Write buffered events and session counters now."""
        async with self._flush_lock:
            events, self._events = self._events, []
            touches, self._touches = self._touches, {}
            if not events and not touches:
                return

            def fn(c: Conn) -> None:
                c.executemany(
                    "INSERT INTO events (ts, type, principal, subject, outcome, duration_s,"
                    " data_json) VALUES (?,?,?,?,?,?,?)",
                    [
                        (
                            e.ts,
                            e.type.value,
                            _clean(e.principal),
                            _clean(self.redact(e.subject)),
                            _clean(e.outcome),
                            e.duration_s,
                            _dumps(_redacted(e.data, self.redact)),
                        )
                        for e in events
                    ],
                )
                c.executemany(
                    "UPDATE sessions SET last_seen=CASE WHEN last_seen > ? THEN last_seen"
                    " ELSE ? END, requests=requests+? WHERE principal=?",
                    [(last, last, n, key) for key, (n, last) in touches.items()],
                )

            try:
                await self.db.write(fn)
            except StoreError:
                self._events = (events + self._events)[-MAX_PENDING_EVENTS:]
                for key, (n, last) in touches.items():
                    n0, last0 = self._touches.get(key, (0, last))
                    self._touches[key] = (n + n0, max(last, last0))
                raise

    # -- sessions ---------------------------------------------------------------------
    async def touch_session(self, p: Principal, now: float | None = None) -> bool:
        """Record that ``p`` was seen; True when it is new."""
        now = now or time.time()
        if p.key in self._known:
            n, _ = self._touches.get(p.key, (0, now))
            self._touches[p.key] = (n + 1, now)
            self._schedule_flush()
            return False
        self._known.add(p.key)

        def fn(c: Conn) -> bool:
            cur = c.execute(
                "UPDATE sessions SET last_seen=?, requests=requests+1 WHERE principal=?",
                (now, p.key),
            )
            if cur.rowcount:
                return False
            c.execute(
                "INSERT INTO sessions VALUES (?,?,?,?,?,?,?,?,?,1)",
                (p.key, p.uid, p.user, p.agent.value, p.session, p.host, p.project, now, now),
            )
            return True

        return await self.db.write(fn)

    async def sessions(self, uid: int | None = None) -> list[dict[str, Any]]:
        await self.flush()
        sql = "SELECT * FROM sessions"
        args: tuple[Any, ...] = ()
        if uid is not None:
            sql += " WHERE uid=?"
            args = (uid,)
        rows = await self.db.fetchall(sql + " ORDER BY last_seen DESC", args)
        return [dict(r) for r in rows]

    # -- jobs -------------------------------------------------------------------------
    async def journal_job(
        self, job: Job, spec: JobSpec, spec_hash: str, *, request_id: str = "", intent: str = ""
    ) -> Job:
        """Insert a job before it is handed to a backend; assigns the next id.

        ``request_id`` is the client's idempotency key (unique per uid);
        ``intent`` the token the backend carries so recovery can find the job.
        """

        def fn(c: Conn) -> Job:
            # one counter row: the next id, also when several processes share the store
            row = c.execute("UPDATE counters SET n = n + 1 WHERE name = 'jobs' RETURNING n")
            job.id = f"t{int(row.fetchone()[0])}"
            c.execute(
                "INSERT INTO jobs (id, backend, backend_id, phase, state, principal, uid, name,"
                " spec_json, spec_hash, submitted_at, resources_json, updated_at,"
                " request_id, intent, cwd) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    job.id,
                    job.backend,
                    job.backend_id,
                    "journaled",
                    job.state.value,
                    job.principal,
                    job.uid,
                    job.name,
                    json.dumps(spec.to_dict()),
                    spec_hash,
                    job.submitted_at,
                    json.dumps(job.resources.to_dict()),
                    job.updated_at,
                    request_id,
                    intent,
                    job.cwd,
                ),
            )
            return job

        return await self.db.write(fn)

    async def mark_handed(self, job_id: str, backend_id: str, output: str, error: str) -> None:
        await self.db.execute(
            "UPDATE jobs SET phase='handed', backend_id=?, output=?, error=?, updated_at=?"
            " WHERE id=?",
            (backend_id, output, error, time.time(), job_id),
        )

    async def update_job(self, job: Job) -> None:
        await self.db.execute(
            "UPDATE jobs SET state=?, started_at=?, ended_at=?, exit_code=?, reason=?,"
            " updated_at=?, nodes=?, resources_json=? WHERE id=?",
            (
                job.state.value,
                job.started_at,
                job.ended_at,
                job.exit_code,
                job.reason,
                job.updated_at,
                job.nodes,
                json.dumps(job.resources.to_dict()),
                job.id,
            ),
        )

    async def get_job(self, ref: str) -> Job | None:
        """A job by Tenantry id (``t12``) or backend id."""
        row = await self.db.fetchone(
            f"SELECT {_JOB_COLS} FROM jobs WHERE id=? OR backend_id=?"
            " ORDER BY submitted_at DESC LIMIT 1",
            (ref, ref),
        )
        return _job(row) if row else None

    async def job_by_request(self, uid: int, request_id: str) -> Job | None:
        """The job a client request id created, if any (the first result of a retry)."""
        row = await self.db.fetchone(
            f"SELECT {_JOB_COLS} FROM jobs WHERE uid=? AND request_id=?", (uid, request_id)
        )
        return _job(row) if row else None

    async def job_intent(self, job_id: str) -> str:
        row = await self.db.fetchone("SELECT intent FROM jobs WHERE id=?", (job_id,))
        return str(row["intent"]) if row else ""

    async def job_spec(self, job_id: str) -> tuple[JobSpec, str] | None:
        row = await self.db.fetchone("SELECT spec_json, phase FROM jobs WHERE id=?", (job_id,))
        if row is None:
            return None
        return JobSpec.from_dict(json.loads(row["spec_json"])), row["phase"]

    async def list_jobs(
        self,
        *,
        uid: int | None = None,
        principal: str | None = None,
        states: Iterable[str] = (),
        active_only: bool = False,
        limit: int = 500,
    ) -> list[Job]:
        where: list[str] = []
        args: list[Any] = []
        if uid is not None:
            where.append("uid=?")
            args.append(uid)
        if principal:
            where.append("principal=?")
            args.append(principal)
        states = list(states)
        if active_only:
            states = [s.value for s in JobState if not s.terminal]
        if states:
            where.append(f"state IN ({','.join('?' * len(states))})")
            args.extend(states)
        sql = f"SELECT {_JOB_COLS} FROM jobs"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY submitted_at DESC LIMIT ?"
        args.append(limit)
        return [_job(r) for r in await self.db.fetchall(sql, args)]

    async def find_duplicate(self, principal: str, spec_hash: str, since: float) -> Job | None:
        row = await self.db.fetchone(
            f"SELECT {_JOB_COLS} FROM jobs WHERE principal=? AND spec_hash=?"
            f" AND submitted_at>=? AND phase='handed' AND state IN ({_REUSABLE})"
            " ORDER BY submitted_at DESC LIMIT 1",
            (principal, spec_hash, since),
        )
        return _job(row) if row else None

    async def unhanded_jobs(self) -> list[Job]:
        rows = await self.db.fetchall(f"SELECT {_JOB_COLS} FROM jobs WHERE phase='journaled'")
        return [_job(r) for r in rows]

    async def job_owners(self, since: float) -> list[tuple[str, str, str]]:
        """(id, backend id, principal key) of jobs not ended, or ended after ``since``."""
        ended = [s.value for s in JobState if s.terminal]
        rows = await self.db.fetchall(
            "SELECT id, backend_id, principal FROM jobs"
            f" WHERE state NOT IN ({','.join('?' * len(ended))}) OR updated_at >= ?",
            (*ended, since),
        )
        return [(str(r[0]), str(r[1]), str(r[2])) for r in rows]

    async def forget_job(self, job_id: str) -> None:
        """Drop a journaled job that the backend refused (it never existed there)."""
        await self.db.execute("DELETE FROM jobs WHERE id=? AND phase='journaled'", (job_id,))

    async def principals_seen(self) -> list[tuple[str, int]]:
        """Every (principal key, uid) that has a job or a session in this store."""
        rows = await self.db.fetchall(
            "SELECT principal, uid FROM jobs UNION SELECT principal, uid FROM sessions"
        )
        return [(str(r[0]), int(r[1])) for r in rows]

    async def active_jobs_of(self, principals: Sequence[str]) -> list[tuple[str, str, str, int]]:
        """(id, backend id, principal key, uid) of the principals' jobs not yet ended."""
        if not principals:
            return []
        active = [s.value for s in JobState if not s.terminal]
        rows = await self.db.fetchall(
            "SELECT id, backend_id, principal, uid FROM jobs"
            f" WHERE principal IN ({','.join('?' * len(principals))})"
            f" AND state IN ({','.join('?' * len(active))})",
            (*principals, *active),
        )
        return [(str(r[0]), str(r[1]), str(r[2]), int(r[3])) for r in rows]

    # -- commands ---------------------------------------------------------------------
    async def command_started(
        self,
        cid: str,
        p: Principal,
        argv: Sequence[str],
        cwd: str,
        where: str,
        *,
        pid: int | None = None,
        pid_start: int | None = None,
        started_at: float | None = None,
    ) -> None:
        """The command's one row, as running (with its pid when it runs here)."""
        await self.db.execute(
            "INSERT INTO commands (id, principal, uid, argv_json, cwd, where_run, started_at,"
            " pid, pid_start) VALUES (?,?,?,?,?,?,?,?,?)",
            (*self._command_cols(cid, p, argv, cwd, where, started_at, keep=True), pid, pid_start),
        )

    def _command_cols(
        self,
        cid: str,
        p: Principal,
        argv: Sequence[str],
        cwd: str,
        where: str,
        started_at: float | None,
        *,
        keep: bool = False,
    ) -> tuple[Any, ...]:
        # argv and cwd are redacted once per command: the start keeps them for the end
        texts = self._texts.pop(cid, None)
        if texts is None:
            texts = (json.dumps([self.redact(a) for a in argv]), self.redact(cwd))
        if keep:
            if len(self._texts) >= MAX_PENDING_TEXTS:  # ends never written (a crash test)
                self._texts.clear()
            self._texts[cid] = texts
        return (cid, p.key, p.uid, texts[0], texts[1], where, started_at or time.time())

    async def command_finished(
        self,
        cid: str,
        p: Principal,
        argv: Sequence[str],
        cwd: str,
        *,
        exit_code: int | None,
        state: str,
        reason: str,
        cpu_s: float,
        max_rss_kb: int,
        where: str,
        started_at: float | None = None,
    ) -> None:
        """The command's end, on its row (written now if it never started: not found)."""
        await self.db.execute(
            "INSERT INTO commands (id, principal, uid, argv_json, cwd, where_run, started_at,"
            " ended_at, exit_code, state, reason, cpu_s, max_rss_kb)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)"
            " ON CONFLICT (id) DO UPDATE SET ended_at=excluded.ended_at,"
            " exit_code=excluded.exit_code, state=excluded.state, reason=excluded.reason,"
            " cpu_s=excluded.cpu_s, max_rss_kb=excluded.max_rss_kb, where_run=excluded.where_run",
            (
                *self._command_cols(cid, p, argv, cwd, where, started_at),
                time.time(),
                exit_code,
                state,
                self.redact(reason),
                cpu_s,
                max_rss_kb,
            ),
        )

    async def running_commands(self) -> list[tuple[str, int | None, int | None]]:
        """(id, pid, pid start time) of commands recorded as running."""
        rows = await self.db.fetchall(
            "SELECT id, pid, pid_start FROM commands WHERE state='running'"
        )
        return [(r["id"], r["pid"], r["pid_start"]) for r in rows]

    async def abandon_running_commands(self) -> int:
        """Commands still 'running' after a restart ended with the old daemon."""
        return await self.db.execute(
            "UPDATE commands SET state='lost', reason='ended: the daemon stopped while it ran',"
            " ended_at=? WHERE state='running'",
            (time.time(),),
        )

    # -- events -----------------------------------------------------------------------
    async def add_event(self, e: Event) -> None:
        self._events.append(e)
        self._schedule_flush()

    async def events_after(
        self, after_id: int, *, types: Sequence[str] = (), limit: int = 1000
    ) -> list[dict[str, Any]]:
        """Events with ``id > after_id`` (of ``types``), by id: replicas follow the journal."""
        await self.flush()
        where, args = "id>?", list[Any]([after_id])
        if types:
            where += f" AND type IN ({','.join('?' * len(types))})"
            args.extend(types)
        rows = await self.db.fetchall(
            f"SELECT * FROM events WHERE {where} ORDER BY id LIMIT ?", [*args, limit]
        )
        out = []
        for r in rows:
            d = dict(r)
            d["data"] = json.loads(d.pop("data_json"))
            out.append(d)
        return out

    async def last_event_id(self) -> int:
        await self.flush()
        row = await self.db.fetchone("SELECT MAX(id) AS n FROM events")
        return int(row["n"] or 0) if row is not None else 0

    async def events(
        self,
        *,
        since: float = 0.0,
        types: Sequence[str] = (),
        principal: str | None = None,
        exact: bool = False,
        limit: int = 1000,
    ) -> list[dict[str, Any]]:
        """Events, oldest first; ``principal`` is a prefix unless ``exact``."""
        await self.flush()
        where = ["ts>=?"]
        args: list[Any] = [since]
        if types:
            where.append(f"type IN ({','.join('?' * len(types))})")
            args.extend(types)
        if principal and exact:
            where.append("principal=?")
            args.append(principal)
        elif principal:
            where.append("substr(principal, 1, ?)=?")
            args.extend([len(principal), principal])
        sql = "SELECT * FROM events WHERE " + " AND ".join(where)
        sql += " ORDER BY id DESC LIMIT ?"
        args.append(limit)
        rows = await self.db.fetchall(sql, args)
        out = []
        for r in reversed(rows):
            d = dict(r)
            d["data"] = json.loads(d.pop("data_json"))
            out.append(d)
        return out
