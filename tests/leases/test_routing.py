"""Routing of commands between the login node and leases."""

from __future__ import annotations

import pytest

from tenantry.core.errors import UsageError
from tenantry.core.models import CommandSpec, Resources
from tenantry.core.settings import Settings, load
from tenantry.leases.routing import route


def settings(allowed: str = "") -> Settings:
    return load(env={}, overrides={"state_dir": "/tmp/x", "login_node_commands": allowed})


def spec(*argv: str, where: str = "auto", cpus: int = 1, gpus: int = 0) -> CommandSpec:
    return CommandSpec(argv=argv, where=where, resources=Resources(cpus=cpus, gpus=gpus))


@pytest.mark.parametrize(
    ("cmd", "allowed", "want"),
    [
        (spec("pytest", "-x"), "", "lease"),
        (spec("git", "status"), "git,ls", "local"),
        (spec("/usr/bin/git", "status"), "git,ls", "local"),
        (spec("pytest"), "git, ls", "lease"),
        (spec("pytest"), "*", "local"),
        (spec("git", cpus=4), "git", "lease"),
        (spec("git", gpus=1), "*", "lease"),
        (spec("pytest", where="local"), "", "local"),
        (spec("git", where="lease"), "git", "lease"),
        (spec("git", where=" LOCAL "), "", "local"),
    ],
)
def test_route(cmd: CommandSpec, allowed: str, want: str) -> None:
    assert route(cmd, settings(allowed)) == want


def test_unknown_where_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="where"):
        route(spec("ls", where="cloud"), settings())
