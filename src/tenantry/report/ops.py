"""Daemon-side op: ``report.latest``, the characterization of the daemon's own store.

For the dashboard: it reads the daemon's SQLite store read-only (callers name
no files: the op never opens a path it is given), builds the report in a worker thread and
returns its compact part (headline table, command rate, hour-of-week,
classification, inputs). Results are cached for ``CACHE_S`` seconds per
parameter set so a polling dashboard does not recompute.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from tenantry.core.errors import IngestError
from tenantry.service.ops import OpContext, op, param

CACHE_S = 60.0
_cache: dict[tuple[str, ...], tuple[float, dict[str, Any]]] = {}
KEYS = (
    "window",
    "headline",
    "command_rate",
    "hour_of_week",
    "off_hours",
    "classification",
    "inputs",
)


def compute(paths: list[str], since: datetime | None, until: datetime | None) -> dict[str, Any]:
    from tenantry.report import metrics, sources

    # a fresh daemon's store may hold nothing yet: an empty report, not an error
    report = metrics.build(sources.load(paths, require_records=False), since, until)
    return {k: report[k] for k in KEYS}


@op(
    "report.latest", "characterize agent vs human use from the daemon's store", action="read_report"
)
async def latest(ctx: OpContext, params: dict[str, Any]) -> dict[str, Any]:
    days = param(params, "days", float, 7.0)
    if days <= 0:
        from tenantry.core.errors import UsageError

        raise UsageError("days must be positive")
    db = ctx.runtime.settings.db_path
    if not db.exists():
        raise IngestError("no telemetry yet: the daemon's store does not exist", hint=str(db))
    until = datetime.now(tz=UTC)
    since = until - timedelta(days=days)
    paths = [str(db)]
    key = (*paths, str(days))
    hit = _cache.get(key)
    if hit is not None and time.monotonic() - hit[0] < CACHE_S:
        return hit[1]
    result = await asyncio.to_thread(compute, paths, since, until)
    _cache[key] = (time.monotonic(), result)
    return result
