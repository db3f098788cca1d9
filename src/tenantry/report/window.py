"""The reporting window: which jobs count, and how much of each job's usage.

Times are UTC. A submission counts when it was submitted inside
``[since, until)``. Usage (core- and GPU-seconds) is clipped to the window in
proportion to the part of the job's run that falls inside it:
``used_s = ElapsedRaw x overlap / (end - start)``, so suspended time stays out
of the total (ElapsedRaw excludes it) and a job running across the boundary is
split. A job still running at dump time has no end: its end is taken as
``start + ElapsedRaw`` (what it had used when the dump was made); so is the end
of a job whose local end time reads earlier than its start (it ended in the
hour a DST fall-back repeats). Without
bounds the window is the span of the data and nothing is clipped.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import polars as pl


@dataclass(frozen=True, slots=True)
class Window:
    since: datetime | None
    until: datetime | None

    def to_dict(self) -> dict[str, str | None]:
        return {
            "since": self.since.isoformat() if self.since else None,
            "until": self.until.isoformat() if self.until else None,
        }


def apply(
    jobs: pl.DataFrame, since: datetime | None, until: datetime | None
) -> tuple[pl.DataFrame, Window]:
    """Jobs relevant to the window with ``used_s``, ``core_h``, ``gpu_h``, ``counted``."""
    # no end (still running), or an end before the start (a local-time dump whose job
    # ended in the repeated hour of a DST fall-back): the run ends start + ElapsedRaw
    by_elapsed = pl.col("start") + pl.duration(seconds=pl.col("elapsed_s"))
    end_eff = (
        pl.when(pl.col("end").is_null() | (pl.col("end") < pl.col("start")))
        .then(by_elapsed)
        .otherwise(pl.col("end"))
        .alias("end_eff")
    )
    df = jobs.with_columns(end_eff)
    if since is None or until is None:
        bounds = df.select(
            lo=pl.min_horizontal(pl.col("submit").min(), pl.col("start").min()),
            hi=pl.max_horizontal(pl.col("end_eff").max(), pl.col("submit").max()),
        ).row(0)
        lo: datetime | None = since or bounds[0]
        hi: datetime | None = until or bounds[1]
    else:
        lo, hi = since, until
    if lo is None or hi is None:  # no timestamps at all
        out = df.with_columns(used_s=pl.col("elapsed_s").cast(pl.Float64), counted=pl.lit(True))
        return _usage(out), Window(lo, hi)
    lo_l, hi_l = pl.lit(lo).dt.cast_time_unit("us"), pl.lit(hi).dt.cast_time_unit("us")
    wall = (pl.col("end_eff") - pl.col("start")).dt.total_seconds()
    overlap = (
        (pl.min_horizontal(pl.col("end_eff"), hi_l) - pl.max_horizontal(pl.col("start"), lo_l))
        .dt.total_seconds()
        .clip(0)
    )
    starts_in = (pl.col("start") >= lo_l) & (pl.col("start") < hi_l)
    frac = (
        pl.when(pl.col("start").is_null())
        .then(0.0)
        .when(wall > 0)
        .then(overlap / wall)
        .when(starts_in)
        .then(1.0)
        .otherwise(0.0)
    )
    # the end of the span is inclusive when no explicit bound was given
    submit_t = pl.coalesce(pl.col("submit"), pl.col("start"))
    upper = (submit_t < hi_l) if until is not None else (submit_t <= hi_l)
    counted = (submit_t >= lo_l) & upper
    out = df.with_columns(
        used_s=(pl.col("elapsed_s") * frac).cast(pl.Float64), counted=counted.fill_null(False)
    ).filter(pl.col("counted") | (pl.col("used_s") > 0))
    return _usage(out), Window(lo, hi)


def _usage(df: pl.DataFrame) -> pl.DataFrame:
    return df.with_columns(
        core_h=pl.col("cpus") * pl.col("used_s") / 3600.0,
        gpu_h=pl.col("gpus") * pl.col("used_s") / 3600.0,
    )
