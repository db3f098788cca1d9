"""Time windows of budgets: where the current window starts and when it resets.

Pure functions of an epoch time, a timezone and the night window, so they are
tested without waiting for midnight.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo

from tenantry.safety.budgets.config import BudgetConfig


def zone(cfg: BudgetConfig) -> tzinfo | None:
    return ZoneInfo(cfg.timezone) if cfg.timezone else None


def _local(ts: float, tz: tzinfo | None) -> datetime:
    return datetime.fromtimestamp(ts, tz) if tz else datetime.fromtimestamp(ts).astimezone()


def _at(day: datetime, minutes: int) -> datetime:
    midnight = day.replace(hour=0, minute=0, second=0, microsecond=0)
    return midnight + timedelta(minutes=minutes)


def bounds(window: str, now: float, cfg: BudgetConfig) -> tuple[float, float] | None:
    """(start, reset) of the window containing ``now``; None when it does not apply now.

    ``total`` has reset ``inf``; ``night`` is None outside the night window.
    """
    if window == "minute":
        start = math.floor(now / 60) * 60
        return float(start), float(start + 60)
    if window == "hour":
        start = math.floor(now / 3600) * 3600
        return float(start), float(start + 3600)
    if window in ("total", "concurrent"):
        return 0.0, math.inf
    tz = zone(cfg)
    local = _local(now, tz)
    if window == "day":
        start_dt = _at(local, 0)
        return start_dt.timestamp(), (start_dt + timedelta(days=1)).timestamp()
    if window == "night":
        s, e = cfg.night_start, cfg.night_end
        minute = local.hour * 60 + local.minute
        if s == e:
            return None
        if s < e:  # e.g. 00:00-06:00, within one day
            if not s <= minute < e:
                return None
            return _at(local, s).timestamp(), _at(local, e).timestamp()
        if minute >= s:  # evening part: ends tomorrow morning
            return _at(local, s).timestamp(), _at(local + timedelta(days=1), e).timestamp()
        if minute < e:  # morning part: started yesterday evening
            return _at(local - timedelta(days=1), s).timestamp(), _at(local, e).timestamp()
        return None
    raise ValueError(f"unknown window {window}")


def describe_reset(reset: float, now: float, cfg: BudgetConfig) -> str:
    if math.isinf(reset):
        return (
            "never (this limit lasts for the whole session; ask an operator or start a new session)"
        )
    when = _local(reset, zone(cfg))
    if reset - now < 86400 and when.date() == _local(now, zone(cfg)).date():
        return when.strftime("%H:%M:%S %Z").strip()
    return when.strftime("%Y-%m-%d %H:%M %Z").strip()
