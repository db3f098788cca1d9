"""Budget configuration: limits by scope, window and metric, from TOML or JSON.

A budgets file looks like this (every table optional; missing tables keep the
defaults below, ``replace_defaults = true`` drops them)::

    warn_fraction = 0.8          # soft threshold: warn at 80 %
    night = "19:00-07:00"        # the night window, local time
    timezone = "Europe/Zurich"   # optional; default: the daemon's local zone
    agents_only = true           # humans are not budgeted
    default_job_hours = 1.0      # walltime assumed for jobs that give none

    [session.minute]             # rate limits of one agent session
    commands = 120

    [user.night]                 # what all of a user's agents may use tonight
    gpu_hours = 16
    warn_fraction = 0.75         # per-window override

Scopes: ``session`` (one agent session), ``user`` (all agent sessions of a
user). Windows: ``minute``, ``hour``, ``day`` (local midnight to midnight),
``night`` (the configured window; outside it the night budget does not
apply), ``total`` (lifetime of the session), ``concurrent`` (leases only).
Metrics: ``core_hours``, ``gpu_hours``, ``jobs``, ``commands``, ``queries``,
``leases``.

The defaults count what costs the facility: submissions (each one reaches
the scheduler's controller), commands (each one runs a process on a shared
host), core- and GPU-hours, leases (they hold nodes). Status queries
(``queries``) are answered from the daemon's shared cache and cost the
scheduler nothing however many agents ask, so no default limits them; an
operator who wants them limited sets a ``queries`` limit, and only then are
they counted. Default numbers: 30 submissions a minute per session is a
sweep loop gone wrong, not a workflow (use an array); 120 commands a minute
is two a second; the daily core/GPU-hours match a modest project share.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tenantry.core.errors import UsageError

METRICS = ("core_hours", "gpu_hours", "jobs", "commands", "queries", "leases")
SCOPES = ("session", "user")
WINDOWS = ("minute", "hour", "day", "night", "total", "concurrent")
# Metrics measured after the fact (from job/command events); a charge only checks them.
CONSUMED = frozenset({"core_hours", "gpu_hours"})


@dataclass(frozen=True, slots=True)
class Limit:
    scope: str
    window: str
    metric: str
    hard: float
    soft: float  # fraction of ``hard`` at which warnings start


@dataclass(frozen=True, slots=True)
class BudgetConfig:
    limits: tuple[Limit, ...]
    warn_fraction: float = 0.8
    night_start: int = 19 * 60  # minutes after local midnight
    night_end: int = 7 * 60
    timezone: str = ""
    agents_only: bool = True
    default_job_hours: float = 1.0

    def applicable(self, metric: str) -> list[Limit]:
        return [lim for lim in self.limits if lim.metric == metric]


DEFAULT_TABLES: dict[str, dict[str, dict[str, float]]] = {
    "session": {
        "minute": {"commands": 120, "jobs": 30},
        "day": {"commands": 5000, "jobs": 500, "core_hours": 500, "gpu_hours": 24},
        "concurrent": {"leases": 2},
    },
    "user": {
        "minute": {"commands": 300},
        "day": {"commands": 20000, "jobs": 2000, "core_hours": 2000, "gpu_hours": 64},
        "night": {"jobs": 500, "core_hours": 500, "gpu_hours": 16},
        "concurrent": {"leases": 4},
    },
}


def _clock(text: str, what: str) -> int:
    try:
        hh, mm = text.strip().split(":")
        value = int(hh) * 60 + int(mm)
    except ValueError as exc:
        raise UsageError(f"budgets: {what} {text!r} is not HH:MM") from exc
    if not 0 <= value < 24 * 60:
        raise UsageError(f"budgets: {what} {text!r} is not a time of day")
    return value


def parse(data: dict[str, Any], *, source: str = "budgets") -> BudgetConfig:
    """Build a config from parsed TOML/JSON, merged over the defaults."""
    warn = float(data.get("warn_fraction", 0.8))
    if not 0 < warn <= 1:
        raise UsageError(f"{source}: warn_fraction must be in (0, 1], got {warn}")
    night = str(data.get("night", "19:00-07:00"))
    if "-" not in night:
        raise UsageError(f"{source}: night must look like 19:00-07:00, got {night!r}")
    start_s, end_s = night.split("-", 1)
    tables: dict[str, dict[str, dict[str, Any]]] = (
        {} if data.get("replace_defaults") else json.loads(json.dumps(DEFAULT_TABLES))
    )
    known_top = {
        "warn_fraction", "night", "timezone", "agents_only", "default_job_hours",
        "replace_defaults", *SCOPES,
    }  # fmt: skip
    unknown = sorted(set(data) - known_top)
    if unknown:
        raise UsageError(
            f"{source}: unknown key(s) {', '.join(unknown)}",
            hint="top-level keys: " + ", ".join(sorted(known_top)),
        )
    for scope in SCOPES:
        for window, metrics in (data.get(scope) or {}).items():
            if window not in WINDOWS:
                raise UsageError(
                    f"{source}: unknown window {scope}.{window}",
                    hint=f"windows: {', '.join(WINDOWS)}",
                )
            if not isinstance(metrics, dict):
                raise UsageError(f"{source}: {scope}.{window} must be a table of metric = limit")
            tables.setdefault(scope, {}).setdefault(window, {}).update(metrics)
    limits: list[Limit] = []
    for scope, windows in tables.items():
        for window, metrics in windows.items():
            soft = float(metrics.get("warn_fraction", warn))
            for metric, value in metrics.items():
                if metric == "warn_fraction":
                    continue
                if metric not in METRICS:
                    raise UsageError(
                        f"{source}: unknown metric {scope}.{window}.{metric}",
                        hint=f"metrics: {', '.join(METRICS)}",
                    )
                if (metric == "leases") != (window == "concurrent"):
                    raise UsageError(
                        f"{source}: leases are limited only in a [<scope>.concurrent] table"
                    )
                if value is None or float(value) < 0:
                    continue
                limits.append(Limit(scope, window, metric, float(value), soft))
    return BudgetConfig(
        limits=tuple(limits),
        warn_fraction=warn,
        night_start=_clock(start_s, "night start"),
        night_end=_clock(end_s, "night end"),
        timezone=str(data.get("timezone", "")),
        agents_only=bool(data.get("agents_only", True)),
        default_job_hours=float(data.get("default_job_hours", 1.0)),
    )


def load(path: str) -> BudgetConfig:
    """The config in ``path`` (TOML, or JSON by suffix/content); "" = defaults."""
    if not path:
        return parse({})
    p = Path(path).expanduser()
    try:
        text = p.read_text()
    except OSError as exc:
        raise UsageError(
            f"cannot read budgets file {p}: {exc}", hint="fix setting budgets_file"
        ) from exc
    try:
        data = (
            json.loads(text)
            if p.suffix == ".json" or text.lstrip().startswith("{")
            else tomllib.loads(text)
        )
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"cannot parse budgets file {p}: {exc}") from exc
    return parse(data, source=str(p))
