"""The behavioural table: agents' and humans' commands, measured from their own records.

Input: actions (agent tool calls from transcripts, human shell commands from
timestamped histories, Tenantry-run commands from its telemetry). Per actor
class (agent / human):

- commands per active hour: commands / active hours, an active hour being a
  clock hour in which that user's actor (one agent product, or the human's
  shell) issued at least one command; the ratio is agent rate / human rate;
- loop shape: shares of explore / modify / execute commands, and the share of
  commands that complete an explore -> modify -> execute cycle within one session;
- night (20:00-08:00) and weekend shares in the facility's time zone.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from tenantry.report import classify as cl
from tenantry.report.actions import ACTION_SCHEMA

DEFINITION = (
    "agent commands are tool calls in agent transcripts and Tenantry-run agent commands; human "
    "commands are timestamped shell-history lines and Tenantry-run human commands. Rate = "
    "commands / active hours (clock hours with >= 1 command of that user's actor)."
)


def _from_telemetry(commands: pl.DataFrame) -> pl.DataFrame:
    if commands.is_empty():
        return pl.DataFrame(schema=ACTION_SCHEMA)
    return commands.select(
        pl.col("source"),
        pl.col("user"),
        pl.col("agent").alias("actor"),
        pl.col("session"),
        pl.col("ts"),
        pl.lit("tenantry").alias("tool"),
        pl.lit("execute").alias("category"),
        pl.lit(None, dtype=pl.String).alias("key"),
    )


def table(actions: pl.DataFrame | None, commands: pl.DataFrame, tz: str) -> dict[str, Any]:
    parts = [_from_telemetry(commands)]
    if actions is not None:
        parts.append(actions)
    a = pl.concat([p.select(list(ACTION_SCHEMA)) for p in parts], how="vertical").drop_nulls("ts")
    out: dict[str, Any] = {"definition": DEFINITION, "time_zone": tz}
    if a.is_empty():
        out["note"] = "no transcripts, histories or telemetry commands given"
        return out
    a = a.with_columns(
        cls=pl.when(pl.col("actor") == "human").then(pl.lit("human")).otherwise(pl.lit("agent"))
    )
    t = cl.local(pl.col("ts"), tz)
    seq = a.sort("session", "ts").with_columns(
        p1=pl.col("category").shift(1).over("session"),
        p2=pl.col("category").shift(2).over("session"),
    )
    cycle = (
        (pl.col("category") == "execute") & (pl.col("p1") == "modify") & (pl.col("p2") == "explore")
    )
    g = seq.group_by("cls").agg(
        commands=pl.len(),
        active_hours=pl.struct("user", "actor", pl.col("ts").dt.truncate("1h")).n_unique(),
        actors=pl.struct("user", "actor").n_unique(),
        sessions=pl.col("session").n_unique(),
        explore=(pl.col("category") == "explore").mean(),
        modify=(pl.col("category") == "modify").mean(),
        execute=(pl.col("category") == "execute").mean(),
        cycles=cycle.sum(),
        night=((t.dt.hour() >= cl.NIGHT_START) | (t.dt.hour() < cl.NIGHT_END)).mean(),
        weekend=(t.dt.weekday() >= 6).mean(),
    )
    rates: dict[str, float] = {}
    for row in g.iter_rows(named=True):
        c = str(row["cls"])
        rate = row["commands"] / row["active_hours"] if row["active_hours"] else None
        if rate is not None:
            rates[c] = rate
        out[c] = {
            "commands": int(row["commands"]),
            "active_hours": int(row["active_hours"]),
            "actors": int(row["actors"]),
            "sessions": int(row["sessions"]),
            "rate_per_hour": None if rate is None else round(rate, 3),
            "loop_shape_pct": {
                k: round(100 * float(row[k]), 2) for k in ("explore", "modify", "execute")
            },
            "explore_modify_execute_cycles": int(row["cycles"]),
            "night_pct": round(100 * float(row["night"]), 2),
            "weekend_pct": round(100 * float(row["weekend"]), 2),
        }
    if "agent" in rates and "human" in rates and rates["human"]:
        out["ratio"] = round(rates["agent"] / rates["human"], 3)
    return out
