"""The daemon makes its socket's directory private, and never a shared one."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from tenantry.core.errors import UsageError
from tenantry.gateway.server import _private_dir


def test_a_socket_directory_is_made_private(tmp_path: Path) -> None:
    d = tmp_path / "run"
    d.mkdir(mode=0o755)
    _private_dir(d)
    assert stat.S_IMODE(d.stat().st_mode) == 0o700
    _private_dir(tmp_path / "new" / "dir")
    assert stat.S_IMODE((tmp_path / "new" / "dir").stat().st_mode) == 0o700


@pytest.mark.parametrize("mode", [0o1777, 0o777, 0o1755])
def test_a_shared_directory_like_tmp_is_refused_and_left_as_it_is(
    tmp_path: Path, mode: int
) -> None:
    shared = tmp_path / "tmp"
    shared.mkdir()
    shared.chmod(mode)
    with pytest.raises(UsageError, match="shared directory"):
        _private_dir(shared)  # `--socket /tmp/x.sock` as root made /tmp 0700
    assert stat.S_IMODE(shared.stat().st_mode) == mode
