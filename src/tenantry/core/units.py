"""Slurm-style time and memory strings, parsed as sbatch does. Standard library only."""

from __future__ import annotations

import re

from tenantry.core.errors import UsageError

_MEM = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)B?\s*$", re.IGNORECASE)
_MEM_FACTOR = {"K": 1 / 1024, "": 1, "M": 1, "G": 1024, "T": 1024 * 1024}


def parse_mem_mb(text: str) -> int:
    """``4G`` -> 4096, ``512M``/``512`` -> 512 (megabytes, as sbatch's default unit)."""
    m = _MEM.match(text)
    if not m:
        raise UsageError(f"cannot read memory size {text!r}", hint="use e.g. 512M, 4G or 1T")
    value = float(m.group(1)) * _MEM_FACTOR[m.group(2).upper()]
    return max(1, int(value))


def parse_time_s(text: str) -> int:
    """Slurm time: ``M``, ``M:S``, ``H:M:S``, ``D-H``, ``D-H:M``, ``D-H:M:S`` -> seconds."""
    t = text.strip()
    if t.upper() in {"INFINITE", "UNLIMITED"} or t == "0":
        raise UsageError(
            f"time limit {text!r} means unlimited, which Tenantry does not accept",
            hint="give a real limit such as 30 (minutes) or 2:00:00",
        )
    days = 0
    try:
        if "-" in t:
            d, _, t = t.partition("-")
            days = int(d)
            parts = [int(x) for x in t.split(":")]
            while len(parts) < 3:
                parts.append(0)
            h, m, s = parts[:3]
        else:
            parts = [int(x) for x in t.split(":")]
            if len(parts) == 1:
                h, m, s = 0, parts[0], 0
            elif len(parts) == 2:
                h, m, s = 0, parts[0], parts[1]
            elif len(parts) == 3:
                h, m, s = parts
            else:
                raise ValueError(t)
    except ValueError as exc:
        raise UsageError(
            f"cannot read time limit {text!r}",
            hint="use minutes (30), M:S, H:M:S or D-H:M:S as sbatch does",
        ) from exc
    total = ((days * 24 + h) * 60 + m) * 60 + s
    if total <= 0 or min(days, h, m, s) < 0:
        raise UsageError(f"time limit {text!r} must be positive")
    return total


def format_duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    s = int(seconds)
    d, s = divmod(s, 86400)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    return f"{d}-{h:02d}:{m:02d}:{s:02d}" if d else f"{h:02d}:{m:02d}:{s:02d}"
