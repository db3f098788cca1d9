"""Read Tenantry's own telemetry: the main store's SQLite file, read-only.

Sessions give each principal's agent product (detected by the daemon from the
agent's environment markers). Commands become rows of the command table.
Jobs the daemon ran itself (``backend != 'slurm'``) become job rows carrying an
attribution tag in their comment, so the classifier treats them like tagged
Slurm jobs; Slurm jobs are left to the sacct dump, which is authoritative for
their usage (and carries the same tag).
"""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from tenantry.core import attribution
from tenantry.core.errors import IngestError
from tenantry.core.models import AgentProduct, Principal
from tenantry.report.schema import (
    COMMAND_SCHEMA,
    JOB_SCHEMA,
    SESSION_SCHEMA,
    Dataset,
    IngestStats,
    conform,
)

MAGIC = b"SQLite format 3\x00"


def looks_like(head: bytes) -> bool:
    return head.startswith(MAGIC)


def split_key(key: str) -> tuple[str, str, str]:
    """``user/agent/session`` -> parts (``-`` session -> empty)."""
    user, _, rest = key.partition("/")
    agent, _, session = rest.partition("/")
    return user, agent or "human", "" if session == "-" else session


def _ts(value: Any) -> datetime | None:
    return None if value is None else datetime.fromtimestamp(float(value), tz=UTC)


def tag(user: str, agent: str, session: str) -> str:
    try:
        product = AgentProduct(agent)
    except ValueError:
        product = AgentProduct.OTHER_AGENT
    return attribution.encode(Principal(uid=-1, user=user, agent=product, session=session))


def _rows(conn: sqlite3.Connection, sql: str) -> list[sqlite3.Row]:
    try:
        return list(conn.execute(sql))
    except sqlite3.Error as exc:
        raise IngestError(f"telemetry store: {exc}") from exc


def read_telemetry(path: str | Path) -> Dataset:
    p = Path(path)
    stats = IngestStats(source=str(p), kind="telemetry")
    try:
        conn = sqlite3.connect(f"{p.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise IngestError(f"cannot open {p} read-only: {exc}") from exc
    conn.row_factory = sqlite3.Row
    try:
        sessions = [
            {"user": r["user"], "agent": r["agent"], "session": r["session"]}
            for r in _rows(conn, "SELECT user, agent, session FROM sessions")
        ]
        commands = []
        for r in _rows(conn, "SELECT principal, started_at FROM commands"):
            user, agent, session = split_key(r["principal"])
            commands.append(
                {
                    "source": p.name,
                    "user": user,
                    "agent": agent,
                    "session": session,
                    "ts": _ts(r["started_at"]),
                }
            )
        jobs = []
        sql = (
            "SELECT id, backend, state, principal, name, submitted_at, started_at, ended_at,"
            " exit_code, resources_json FROM jobs WHERE backend != 'slurm'"
        )
        for r in _rows(conn, sql):
            user, agent, session = split_key(r["principal"])
            res = json.loads(r["resources_json"] or "{}")
            start, end = _ts(r["started_at"]), _ts(r["ended_at"])
            elapsed = int(r["ended_at"] - r["started_at"]) if start and end else 0
            jobs.append(
                {
                    "source": p.name,
                    "job_id": r["id"],
                    "submission_id": f"tenantry:{r['id']}",
                    "user": user,
                    "name": r["name"],
                    "state": str(r["state"]).upper(),
                    "submit": _ts(r["submitted_at"]),
                    "start": start,
                    "end": end,
                    "elapsed_s": elapsed,
                    "cpus": int(res.get("cpus") or 1),
                    "gpus": int(res.get("gpus") or 0),
                    "exit_code": None if r["exit_code"] is None else str(r["exit_code"]),
                    "comment": tag(user, agent, session),
                }
            )
    finally:
        conn.close()
    stats.records = len(jobs)
    stats.notes.append(f"{len(sessions)} sessions, {len(commands)} commands")
    return Dataset(
        jobs=conform(pl.DataFrame(jobs, schema=JOB_SCHEMA), JOB_SCHEMA),
        commands=conform(pl.DataFrame(commands, schema=COMMAND_SCHEMA), COMMAND_SCHEMA),
        sessions=conform(pl.DataFrame(sessions, schema=SESSION_SCHEMA), SESSION_SCHEMA),
        stats=[stats],
    )
