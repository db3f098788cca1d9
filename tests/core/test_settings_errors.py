from __future__ import annotations

from pathlib import Path

import pytest

from tenantry.core import errors
from tenantry.core.settings import DECLARED, Settings, load


def test_every_declared_setting_is_a_field() -> None:
    fields = set(Settings.__annotations__)
    assert {s.name for s in DECLARED} == fields


def test_env_config_and_overrides(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text('backend = "slurm"\nlocal_slots = 3\n')
    s = load(env={"TENANTRY_STATE_DIR": str(tmp_path), "TENANTRY_LOCAL_SLOTS": "5"})
    assert (s.backend, s.local_slots) == ("slurm", 5)
    assert s.socket == str(tmp_path / "sock")
    s = load(env={"TENANTRY_STATE_DIR": str(tmp_path)}, overrides={"backend": "local"})
    assert s.backend == "local"


def test_bad_settings_are_usage_errors(tmp_path: Path) -> None:
    with pytest.raises(errors.UsageError, match="local_slots"):
        load(env={"TENANTRY_STATE_DIR": str(tmp_path), "TENANTRY_LOCAL_SLOTS": "many"})
    (tmp_path / "config.toml").write_text("nope = 1\n")
    with pytest.raises(errors.UsageError, match="unknown setting"):
        load(env={"TENANTRY_STATE_DIR": str(tmp_path)})
    (tmp_path / "config.toml").write_text("= broken")
    with pytest.raises(errors.UsageError, match="cannot parse"):
        load(env={"TENANTRY_STATE_DIR": str(tmp_path)})


def _leaves(cls: type[errors.TenantryError]) -> list[type[errors.TenantryError]]:
    out = [cls]
    for sub in cls.__subclasses__():
        out.extend(_leaves(sub))
    return out


def test_error_codes_unique_and_roundtrip() -> None:
    classes = _leaves(errors.TenantryError)
    codes = [c.code for c in classes]
    assert len(codes) == len(set(codes)), codes
    for cls in classes:
        err = cls("msg", hint="do x", job="t1")
        back = errors.from_dict(err.to_dict())
        assert type(back) is cls
        assert (back.message, back.hint, back.details) == ("msg", "do x", {"job": "t1"})


def test_error_tree_is_documented() -> None:
    doc = errors.__doc__ or ""
    for cls in _leaves(errors.TenantryError):
        assert cls.__name__ in doc, f"{cls.__name__} missing from the errors.py tree drawing"


def test_settings_are_frozen_and_replaceable(tmp_path: Path) -> None:
    s = load(env={"TENANTRY_STATE_DIR": str(tmp_path)})
    with pytest.raises(AttributeError):
        s.backend = "slurm"  # type: ignore[misc]
    t = s.replace(backend="slurm")
    assert (s.backend, t.backend) == ("local", "slurm")
    assert t == s.replace(backend="slurm") and t != s
    assert s.db_path == tmp_path / "tenantry.sqlite3"
    with pytest.raises(TypeError):
        Settings(nope=1)
