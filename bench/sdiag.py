"""What the benchmarks read from ``sdiag``: the ``NAME (ID) count:N`` lines of one section."""

from __future__ import annotations

import re

COUNT_LINE = re.compile(r"^\s+(\S+)\s+\(\s*\d+\)\s+count:(\d+)")


def counts(section: str) -> dict[str, int]:
    """The count of each name (an RPC type or a user) in one section of ``sdiag`` output."""
    out: dict[str, int] = {}
    for line in section.splitlines():
        m = COUNT_LINE.match(line)
        if m:
            out[m.group(1)] = int(m.group(2))
    return out
