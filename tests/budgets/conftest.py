"""A real daemon per test, reusing the gateway tests' helpers (tests/gateway/conftest.py)."""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest


def _gateway_helpers() -> ModuleType:
    name = "_tenantry_gateway_test_helpers"
    if name in sys.modules:
        return sys.modules[name]
    path = Path(__file__).parents[1] / "gateway" / "conftest.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


gw = _gateway_helpers()
wait_for = gw.wait_for


@pytest.fixture
def start_daemon() -> Iterator[Callable[..., Any]]:
    started: list[Any] = []

    def start(files: dict[str, str] | None = None, **env: str) -> Any:
        state = tempfile.mkdtemp(prefix="tnt-")
        os.chmod(state, 0o700)
        for name, text in (files or {}).items():
            (Path(state) / name).write_text(text)
        env = {k: v.replace("{state}", state) for k, v in env.items()}
        d = gw.Daemon(
            state,
            gw.clean_env(
                state, TENANTRY_LOCAL_SLOTS="2", TENANTRY_POLL_FAST_S="0.1",
                TENANTRY_POLL_SLOW_S="0.5", **env,
            ),
        )  # fmt: skip
        d.start()
        started.append(d)
        return d

    yield start
    for d in started:
        d.stop()
        if os.environ.get("TENANTRY_TEST_SHOW_LOG"):
            sys.stderr.write(d.log())
