from __future__ import annotations

from collections.abc import Callable

import pytest

from tenantry.core.errors import UsageError
from tenantry.core.units import format_duration, parse_mem_mb, parse_time_s


@pytest.mark.parametrize(
    ("parse", "text", "value"),
    [
        # Slurm time limits, in seconds
        (parse_time_s, "30", 1800),
        (parse_time_s, "1:30", 90),
        (parse_time_s, "2:00:00", 7200),
        (parse_time_s, "1-0", 86400),
        (parse_time_s, "1-2:3", 93780),
        (parse_time_s, "1-2:3:4", 93784),
        (parse_time_s, "0:01", 1),
        # Slurm memory sizes, in MB
        (parse_mem_mb, "512", 512),
        (parse_mem_mb, "512M", 512),
        (parse_mem_mb, "4G", 4096),
        (parse_mem_mb, "1T", 1048576),
        (parse_mem_mb, "2gb", 2048),
        (parse_mem_mb, "1.5G", 1536),
        (parse_mem_mb, "2048K", 2),
    ],
)
def test_parse(parse: Callable[[str], int], text: str, value: int) -> None:
    assert parse(text) == value


@pytest.mark.parametrize("text", ["0", "UNLIMITED", "infinite", "abc", "1:2:3:4", "-5", ""])
def test_bad_time(text: str) -> None:
    with pytest.raises(UsageError):
        parse_time_s(text)


def test_bad_mem() -> None:
    with pytest.raises(UsageError, match="memory size"):
        parse_mem_mb("lots")


def test_format_duration() -> None:
    assert format_duration(None) == "-"
    assert format_duration(59) == "00:00:59"
    assert format_duration(90061) == "1-01:01:01"
