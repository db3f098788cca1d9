"""Slurm field semantics as polars expressions (shared by the sacct ingesters).

- Timestamps are ``YYYY-MM-DDTHH:MM:SS``; ``Unknown``/``None`` mean absent. A dump
  made with ``TZ=UTC`` (as Open XDMoD does) is read as UTC; otherwise give the
  zone it was made in and local times are converted (an ambiguous hour at a DST
  fall-back resolves to the earlier instant, a nonexistent one becomes null).
- ``Elapsed`` is ``[D-][HH:]MM:SS``; ``ElapsedRaw`` (seconds) wins when present.
  Neither includes suspended time, which is why end - start is never used.
- GPUs come from ``AllocTRES``: ``gres/gpu=N`` when present, else the sum of the
  typed entries ``gres/gpu:TYPE=N`` (Slurm lists both; count them once).
- A job id ``123``, ``123_4``, ``123_[1-3]``, ``123+1`` belongs to submission
  ``123``; ids with a ``.`` are steps.
"""

from __future__ import annotations

import polars as pl

from tenantry.report.schema import UTC_TS

TS_FORMAT = "%Y-%m-%dT%H:%M:%S"
JOB_ID_RE = r"^\d+(?:_(?:\d+|\[[^\]]*\]))?(?:\+\d+)?(?:\.[A-Za-z0-9_+\-]+)?$"


def timestamp(col: str, tz: str | None = None) -> pl.Expr:
    """A UTC datetime from a Slurm timestamp column (null when absent/unparsable)."""
    naive = pl.col(col).str.strip_chars().str.to_datetime(TS_FORMAT, strict=False, time_unit="us")
    if tz is None or tz.upper() == "UTC":
        return naive.dt.replace_time_zone("UTC").alias(col)
    local = naive.dt.replace_time_zone(tz, ambiguous="earliest", non_existent="null")
    return local.dt.convert_time_zone("UTC").cast(UTC_TS).alias(col)


def elapsed_seconds(col: str) -> pl.Expr:
    """Seconds from ``[D-][HH:]MM:SS[.frac]`` (null when it does not match)."""
    parts = pl.col(col).str.extract_groups(r"^(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)(?:\.\d+)?$")
    days = parts.struct.field("1").cast(pl.Int64, strict=False).fill_null(0)
    hours = parts.struct.field("2").cast(pl.Int64, strict=False).fill_null(0)
    minutes = parts.struct.field("3").cast(pl.Int64, strict=False)
    seconds = parts.struct.field("4").cast(pl.Int64, strict=False)
    return days * 86400 + hours * 3600 + minutes * 60 + seconds


def gpus_from_tres(col: str) -> pl.Expr:
    """Allocated GPUs from a TRES string such as ``cpu=4,gres/gpu:a100=2,gres/gpu=2``."""
    text = pl.col(col).fill_null("")
    untyped = text.str.extract(r"(?:^|,)gres/gpu=(\d+)", 1).cast(pl.Int64, strict=False)
    typed = (
        text.str.extract_all(r"gres/gpu:[^=,]+=\d+")
        .list.eval(pl.element().str.extract(r"=(\d+)$", 1).cast(pl.Int64, strict=False))
        .list.sum()
    )
    return pl.coalesce(untyped, typed, pl.lit(0, dtype=pl.Int64)).cast(pl.Int64)


def base_state(col: str) -> pl.Expr:
    """``CANCELLED by 1000`` -> ``CANCELLED``."""
    return pl.col(col).str.strip_chars().str.to_uppercase().str.extract(r"^([A-Z_]+)", 1)


def submission_base(col: str) -> pl.Expr:
    """The sbatch-level id of a job id (array task and het offset stripped)."""
    return pl.col(col).str.extract(r"^(\d+)", 1)


def is_step(col: str) -> pl.Expr:
    return pl.col(col).str.contains(".", literal=True)


def gpus_from_tres_text(text: str) -> int:
    """Pure-Python twin of :func:`gpus_from_tres` (used by the JSON ingester tests)."""
    untyped: int | None = None
    typed = 0
    for item in text.split(","):
        key, _, value = item.partition("=")
        if not value.isdigit():
            continue
        if key == "gres/gpu":
            untyped = int(value)
        elif key.startswith("gres/gpu:"):
            typed += int(value)
    return untyped if untyped is not None else typed
