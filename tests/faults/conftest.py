"""The fault suite (``pytest -m faults``): crashes, a full disk, hostile input.

Its size is one knob: ``TENANTRY_FAULT_ITERATIONS`` (default 2, for CI; the
full run is 20). The fuzz sends ``TENANTRY_FAULT_ITERATIONS * 1000`` requests
(20,000 in the full run).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

ITERATIONS = int(os.environ.get("TENANTRY_FAULT_ITERATIONS", "2"))
gw: Any = sys.modules["_tenantry_gateway_test_helpers"]  # loaded by tests/conftest.py


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/faults/" in str(item.path):
            item.add_marker(pytest.mark.faults)


@pytest.fixture
def fault_daemon() -> Iterator[Callable[..., Any]]:
    """Start real daemons on private state directories; removed afterwards."""
    with gw.daemons(TENANTRY_POLL_FAST_S="0.1", TENANTRY_POLL_SLOW_S="0.5") as start:
        yield start
