"""The normalized job table every ingester produces, and what ingest saw.

One row per job *allocation record* (array tasks and het components are rows of
their own; job steps are not). ``submission_id`` names the sbatch call the row
came from, so submissions are counted once per array or het job, and a
requeued job's earlier runs (``--duplicates``) share it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

UTC_TS = pl.Datetime("us", "UTC")

JOB_SCHEMA: dict[str, pl.DataType] = {
    "source": pl.String(),
    "cluster": pl.String(),
    "job_id": pl.String(),
    "submission_id": pl.String(),
    "user": pl.String(),
    "account": pl.String(),
    "partition": pl.String(),
    "name": pl.String(),
    "state": pl.String(),
    "submit": UTC_TS,
    "start": UTC_TS,
    "end": UTC_TS,
    "elapsed_s": pl.Int64(),
    "cpus": pl.Int64(),
    "gpus": pl.Int64(),
    "exit_code": pl.String(),
    "comment": pl.String(),
    "admin_comment": pl.String(),
    "submit_line": pl.String(),
    "env": pl.String(),
    "extra": pl.String(),  # columns a reader keeps verbatim (extended SWF)
}

COMMAND_SCHEMA: dict[str, pl.DataType] = {
    "source": pl.String(),
    "user": pl.String(),
    "agent": pl.String(),
    "session": pl.String(),
    "ts": UTC_TS,
}

SESSION_SCHEMA: dict[str, pl.DataType] = {
    "user": pl.String(),
    "agent": pl.String(),
    "session": pl.String(),
}

# Slurm end states whose resources count as wasted.
WASTE_STATES = ("FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "BOOT_FAIL")
FAIL_STATES = ("FAILED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "BOOT_FAIL")


def conform(df: pl.DataFrame, schema: dict[str, pl.DataType]) -> pl.DataFrame:
    """Select ``schema``'s columns in order, adding missing ones as nulls, casting."""
    cols = []
    for name, dtype in schema.items():
        if name in df.columns:
            cols.append(pl.col(name).cast(dtype, strict=False))
        else:
            cols.append(pl.lit(None, dtype=dtype).alias(name))
    return df.select(cols)


def empty(schema: dict[str, pl.DataType]) -> pl.DataFrame:
    return pl.DataFrame(schema=schema)


@dataclass(slots=True)
class Unreadable:
    """A line (or lines) an ingester could not turn into a record."""

    source: str
    line: int  # 1-based first line number
    reason: str
    text: str  # first 200 characters

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "line": self.line, "reason": self.reason, "text": self.text}


@dataclass(slots=True)
class IngestStats:
    """What one input contributed, and what it could not."""

    source: str
    kind: str
    records: int = 0
    skipped_steps: int = 0
    repaired: int = 0
    unreadable: list[Unreadable] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    tz: str | None = None  # the zone the input declares (SWF TimeZoneString)
    namespace: str = ""  # users and job ids of this input live here
    duplicates: int = 0  # records dropped as already read from an earlier input

    def to_dict(self, limit: int = 50) -> dict[str, Any]:
        return {
            "source": self.source,
            "kind": self.kind,
            "time_zone": self.tz,
            "namespace": self.namespace,
            "duplicates_dropped": self.duplicates,
            "records": self.records,
            "skipped_steps": self.skipped_steps,
            "repaired": self.repaired,
            "unreadable": len(self.unreadable),
            "unreadable_examples": [u.to_dict() for u in self.unreadable[:limit]],
            "notes": list(self.notes),
        }


@dataclass(slots=True)
class Dataset:
    """Everything ingested: jobs, commands (telemetry), sessions, and per-input stats."""

    jobs: pl.DataFrame = field(default_factory=lambda: empty(JOB_SCHEMA))
    commands: pl.DataFrame = field(default_factory=lambda: empty(COMMAND_SCHEMA))
    sessions: pl.DataFrame = field(default_factory=lambda: empty(SESSION_SCHEMA))
    stats: list[IngestStats] = field(default_factory=list)
    # agents' tool calls and humans' shell commands (transcripts, histories)
    actions: pl.DataFrame | None = None
    combined: dict[str, Any] = field(default_factory=dict)  # how the inputs were merged

    def extend(self, other: Dataset) -> None:
        self.jobs = pl.concat([self.jobs, conform(other.jobs, JOB_SCHEMA)], how="vertical")
        self.commands = pl.concat(
            [self.commands, conform(other.commands, COMMAND_SCHEMA)], how="vertical"
        )
        self.sessions = pl.concat(
            [self.sessions, conform(other.sessions, SESSION_SCHEMA)], how="vertical"
        )
        self.stats.extend(other.stats)
        if other.actions is not None:
            self.actions = (
                other.actions
                if self.actions is None
                else pl.concat([self.actions, other.actions], how="vertical")
            )
