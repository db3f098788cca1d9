"""Dashboard user tokens (facility mode) and the poller's staleness on the executor's wire."""

from __future__ import annotations

from tenantry.backends.base import JobUpdate
from tenantry.core.models import JobState
from tenantry.facility.status import update_to_wire
from tenantry.gateway.dashboard import auth


def test_a_user_token_names_its_user_and_only_the_service_token_makes_it() -> None:
    tok = auth.user_token("service-secret", "tt-alice")
    assert tok.startswith("u.tt-alice.") and auth._user_of(tok) == "tt-alice"
    assert auth.user_token("service-secret", "tt-bob") != tok.replace("tt-alice", "tt-bob")
    assert auth.user_token("other-secret", "tt-alice") != tok
    assert auth._user_of("u.first.last.abc") == "first.last"  # a dotted user name
    assert auth._user_of("not-a-user-token") == "" and auth._user_of("u.") == ""


def test_a_viewers_cookie_is_derived_from_its_token_and_names_the_user() -> None:
    from tenantry.core.models import Principal

    p = Principal(1000, "tt-alice")
    tok = auth.user_token("s", "tt-alice")
    cookie = auth.Viewer(p, False, tok).cookie
    assert cookie.startswith("u.tt-alice.") and tok not in cookie
    assert auth.Viewer(p, True, "s").cookie == auth.cookie_value("s")


def test_scheduler_status_carries_the_pollers_staleness_when_it_has_one() -> None:
    polled = JobUpdate("7", JobState.RUNNING, extra={"staleness_s": 0.4})
    assert update_to_wire(polled)["staleness_s"] == 0.4
    assert "staleness_s" not in update_to_wire(JobUpdate("7", JobState.RUNNING))


async def test_the_cluster_pollers_answers_say_how_old_they_are() -> None:
    from tenantry.facility.polled_status import PolledScheduler
    from tenantry.facility.poller import JobStatus, StatusCache
    from tenantry.facility.seams import Viewer

    now = [100.0]
    cache = StatusCache(clock=lambda: now[0])
    cache.absorb([JobStatus("101", "alice", JobState.RUNNING, seq=1, observed_at=100.0)])
    cache.mark_polled(100.0)
    now[0] = 100.75
    found = await PolledScheduler(cache).query(["101"], Viewer(1, "alice"))
    assert update_to_wire(found["101"])["staleness_s"] == 0.75
