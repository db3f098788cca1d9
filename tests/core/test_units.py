from __future__ import annotations

import pytest

from tenantry.core.errors import UsageError
from tenantry.core.units import format_duration, parse_mem_mb, parse_time_s


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30", 1800),
        ("1:30", 90),
        ("2:00:00", 7200),
        ("1-0", 86400),
        ("1-2:3", 93780),
        ("1-2:3:4", 93784),
        ("0:01", 1),
    ],
)
def test_time(text: str, seconds: int) -> None:
    assert parse_time_s(text) == seconds


@pytest.mark.parametrize("text", ["0", "UNLIMITED", "infinite", "abc", "1:2:3:4", "-5", ""])
def test_bad_time(text: str) -> None:
    with pytest.raises(UsageError):
        parse_time_s(text)


@pytest.mark.parametrize(
    ("text", "mb"),
    [
        ("512", 512),
        ("512M", 512),
        ("4G", 4096),
        ("1T", 1048576),
        ("2gb", 2048),
        ("1.5G", 1536),
        ("2048K", 2),
    ],
)
def test_mem(text: str, mb: int) -> None:
    assert parse_mem_mb(text) == mb


def test_bad_mem() -> None:
    with pytest.raises(UsageError, match="memory size"):
        parse_mem_mb("lots")


def test_format_duration() -> None:
    assert format_duration(None) == "-"
    assert format_duration(59) == "00:00:59"
    assert format_duration(90061) == "1-01:01:01"
