"""The Tenantry commands the hook and the shims suggest instead of a scheduler call exist."""

from __future__ import annotations

import re

import pytest

from tenantry.agents.steer import _SCHEDULER
from tenantry.cli.main import build_parser

SUGGESTED = sorted(
    {m for text in _SCHEDULER.values() for m in re.findall(r"`(tenantry [^`]+)`", text)}
)


@pytest.mark.parametrize("suggestion", SUGGESTED)
def test_every_suggested_command_parses(suggestion: str) -> None:
    argv = [
        {"ID": "1", "SCRIPT": "job.sh", "CMD": "true"}.get(word, word)
        for word in suggestion.split()[1:]
    ]
    build_parser().parse_args(argv)  # an unknown flag exits with status 2
