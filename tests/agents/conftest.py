"""Fixtures for the real-agent tests (helpers in harness.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tests.agents.harness import Sandbox, close_sandbox, new_sandbox


@pytest.fixture
def sandbox() -> Iterator[Sandbox]:
    box = new_sandbox()
    try:
        yield box
    finally:
        close_sandbox(box)
