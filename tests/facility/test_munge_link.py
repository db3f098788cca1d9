"""The ``munge://`` channel and the TCP listener's request frames (no munged needed)."""

from __future__ import annotations

import json
import socket

import pytest

from tenantry.core import errors
from tenantry.core.models import Principal
from tenantry.facility.identity import parse_claims
from tenantry.facility.link import open_channel
from tenantry.facility.munge_link import MungeChannel, parse_address
from tenantry.facility.tcp import request_of, split_hostport

ME = Principal(uid=1000, user="ana")


def test_munge_addresses_open_the_munge_channel() -> None:
    ch = open_channel("munge://10.0.0.1:7070?socket=/run/m.sock", 3.0)
    assert isinstance(ch, MungeChannel)
    assert (ch.host, ch.port, ch.codec.socket) == ("10.0.0.1", 7070, "/run/m.sock")
    assert parse_address("munge://login2:1") == ("login2", 1, "")


@pytest.mark.parametrize(
    "bad", ["munge://login2", "munge://:7070", "munge://h:x", "munge://h:99999"]
)
def test_a_bad_munge_address_is_a_usage_error(bad: str) -> None:
    with pytest.raises(errors.UsageError):
        open_channel(bad, 1.0)


def test_split_hostport_takes_ipv6_in_brackets() -> None:
    assert split_hostport("[::1]:7070", "x") == ("::1", 7070)


async def test_an_unreachable_service_is_retryable_facility_unavailable() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ch = MungeChannel(f"munge://127.0.0.1:{port}", 2.0)
    try:
        with pytest.raises(errors.FacilityUnavailable) as err:
            await ch.call(ME, "facility.whoami", {})
        assert err.value.retryable
    finally:
        await ch.aclose()


@pytest.mark.parametrize(
    "body",
    [{}, {"op": ""}, {"op": "x", "params": []}, {"op": "x", "claims": "root"}],
)
def test_a_request_frame_needs_an_op_and_objects(body: dict[str, object]) -> None:
    with pytest.raises(errors.UsageError):
        request_of(body)


def test_a_request_frame_carries_no_uid() -> None:
    op, params, claims = request_of({"op": "facility.whoami", "claims": {"uid": 0}})
    assert (op, params) == ("facility.whoami", {})
    assert "uid" not in parse_claims(json.dumps(claims))  # the uid is munged's alone
