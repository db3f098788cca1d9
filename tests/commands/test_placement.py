"""Where a command runs is Tenantry's decision: an agent's ``where`` is a preference."""

from __future__ import annotations

import pytest

from tenantry.core.errors import PolicyDenied, UsageError
from tenantry.core.models import CommandSpec, Resources
from tenantry.core.settings import Settings, load
from tenantry.service.placement import Placement, place


def settings(policy: str = "auto", allowed: str | None = None) -> Settings:
    over: dict[str, object] = {"state_dir": "/nonexistent/t", "login_node_policy": policy}
    if allowed is not None:
        over["login_node_commands"] = allowed
    return load(env={}, overrides=over)


def spec(*argv: str, where: str = "auto", cpus: int = 1) -> CommandSpec:
    return CommandSpec(argv=argv, where=where, resources=Resources(cpus=cpus))


def at(s: CommandSpec, *, agent: bool = True, backend: str = "slurm", **kw: str) -> Placement:
    return place(s, agent=agent, settings=settings(**kw), backend=backend, leases=True)


def test_agent_where_local_off_the_allow_list_goes_to_a_lease() -> None:
    got = at(spec("python3", "train.py", where="local"))
    assert (got.where, got.location) == ("lease", "lease")
    assert "allow-list" in got.note and "python3" in got.note


def test_cheap_commands_stay_on_the_login_node() -> None:
    for argv in (("ls", "-la"), ("/bin/cat", "x"), ("git", "status")):
        got = at(spec(*argv, where="local"))
        assert (got.where, got.location, got.note) == ("local", "login", "")
    # but not when they ask for more than the login node gives
    assert at(spec("ls", where="local", cpus=4)).where == "lease"


def test_a_humans_explicit_where_is_honoured() -> None:
    got = at(spec("python3", where="local"), agent=False)
    assert (got.where, got.location) == ("local", "login")
    assert at(spec("python3"), agent=False).where == "lease"  # auto still routes


def test_refused_when_no_lease_can_take_it() -> None:
    with pytest.raises(PolicyDenied, match="may not run on the login node") as info:
        place(spec("make", where="local"), agent=True, settings=settings(), backend="slurm",
              leases=False)  # fmt: skip
    assert "tenantry submit" in (info.value.hint or "")
    ok = place(spec("ls", where="local"), agent=True, settings=settings(), backend="slurm",
               leases=False)  # fmt: skip
    assert ok.location == "login"


def test_embedded_backend_honours_where_unless_enforced() -> None:
    assert at(spec("python3", where="local"), backend="local").location == "login"
    assert at(spec("python3"), backend="local").where == "local"  # auto: no pilot needed
    # enforced on the embedded backend, the lease is a local pilot process
    assert at(spec("python3", where="local"), backend="local", policy="enforce").where == "lease"
    assert at(spec("python3", where="local"), policy="off").where == "local"


def test_star_allows_everything_and_bad_where_is_a_usage_error() -> None:
    assert at(spec("python3", where="local"), allowed="*").where == "local"
    with pytest.raises(UsageError, match="where"):
        at(spec("ls", where="moon"))
