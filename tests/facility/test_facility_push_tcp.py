"""Job changes pushed over the ``munge://`` TCP link too: a daemon "on another login
node" waits for its job without polling the service. Needs root, Slurm and munged.
"""

from __future__ import annotations

import pytest

from .conftest import Facility, User
from .test_facility_facts_push import wait_pushed
from .test_facility_tcp import alice_b, facility_tcp, tcp_port

__all__ = ["alice_b", "facility_tcp", "tcp_port"]  # the fixtures, imported

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


def test_a_waiter_over_tcp_takes_the_pushed_change(facility_tcp: Facility, alice_b: User) -> None:
    assert alice_b.facility_socket.startswith("munge://")
    assert wait_pushed(facility_tcp, alice_b) <= 1
