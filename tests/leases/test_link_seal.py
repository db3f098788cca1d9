"""Every pilot-link message after the handshake is authenticated, not only the handshake."""

from __future__ import annotations

import json

import pytest

from tenantry.core.errors import PilotProtocolError
from tenantry.leases.pilot import protocol as p


def _pair() -> tuple[p.Seal, p.Seal]:
    k = p.link_key(p.key_of("secret"), "l-1", "pn", "dn")
    return p.Seal(k, "daemon", "pilot"), p.Seal(k, "pilot", "daemon")


def test_sealed_messages_pass_in_order() -> None:
    daemon, pilot = _pair()
    msg = p.Exit(id="c-1", state="completed", code=0)
    assert daemon.open(pilot.close(msg)) == msg
    run = p.Run(id="c-2", argv=("true",), cwd="/", env={}, timeout_s=None)
    assert isinstance(pilot.open(daemon.close(run)), p.Run)


def test_forged_unsealed_message_is_refused() -> None:
    daemon, _pilot = _pair()
    forged = p.encode(p.Exit(id="c-1", state="completed", code=0))  # no key: no MAC
    with pytest.raises(PilotProtocolError, match="unauthenticated"):
        daemon.open(forged)


def test_tampered_replayed_and_reflected_messages_are_refused() -> None:
    daemon, pilot = _pair()
    line = pilot.close(p.Output(id="c-1", stream="stdout", data=b"ok"))
    d = json.loads(line)
    d["data"] = "ZmFrZQ=="  # forged output, old MAC
    with pytest.raises(PilotProtocolError, match="unauthenticated"):
        daemon.open(json.dumps(d).encode())
    assert isinstance(daemon.open(line), p.Output)
    with pytest.raises(PilotProtocolError, match="replayed"):
        daemon.open(line)
    own = daemon.close(p.Cancel(id="c-1"))
    with pytest.raises(PilotProtocolError, match="unauthenticated"):
        daemon.open(own)  # the daemon's own message sent back to it


def test_a_reject_may_arrive_unsealed() -> None:
    _daemon, pilot = _pair()
    assert isinstance(pilot.open(p.encode(p.Reject(reason="authentication failed"))), p.Reject)


def test_a_sealed_message_is_checked_on_its_bytes_without_encoding_it_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The measured cost: every message received was parsed, then encoded again
    (keys sorted) to check its MAC; now the MAC is checked on the line as sent."""
    daemon, pilot = _pair()
    msg = p.Output(id="c-1", stream="stdout", data=b"\xffdata \xe2\x82\xac")
    line = pilot.close(msg)

    def no(body: object) -> bytes:
        raise AssertionError("re-encoded to check the MAC")

    monkeypatch.setattr(p, "_canonical", no)
    assert daemon.open(line) == msg
    tampered = line.replace(b'"c-1"', b'"c-2"')
    monkeypatch.undo()
    with pytest.raises(PilotProtocolError, match="unauthenticated"):
        daemon.open(tampered)
