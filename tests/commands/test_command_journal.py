"""A short command's journal: one row, written as it starts (with its pid) and as it ends.

The measured cost: the journal wrote a row before the spawn, updated it with
the pid after, and again at the end -- three writes per short command.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tenantry.backends.fake import FakeBackend
from tenantry.commands.service import CommandService
from tenantry.core.models import CommandResult, CommandSpec, Principal
from tenantry.core.settings import load
from tenantry.gateway.app import open_runtime
from tenantry.service.runtime import Runtime

ME = Principal(1000, "alice")


@pytest.fixture
async def rt(tmp_path: Path) -> AsyncIterator[Runtime]:
    settings = load(env={"TENANTRY_STATE_DIR": str(tmp_path / "state")})
    async with open_runtime(settings, FakeBackend()) as runtime:
        yield runtime


async def _drop(stream: str, data: bytes) -> None:
    return None


def _writes_to_commands(rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []
    real = rt.journal.db.execute

    async def counting(sql: str, args: Any = ()) -> int:
        if " commands " in f" {sql} ":
            seen.append(sql.split()[0])
        return await real(sql, args)

    monkeypatch.setattr(rt.journal.db, "execute", counting)
    return seen


async def _run_local(rt: Runtime, cwd: Path, program: str) -> CommandResult:
    svc = rt.component("commands", CommandService)
    return await svc.run(ME, CommandSpec(argv=(program,), cwd=str(cwd), where="local"), _drop)


def _rows(rt: Runtime, sql: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(rt.settings.db_path) as conn:
        return conn.execute(sql).fetchall()


async def test_one_row_two_writes_per_short_command(
    rt: Runtime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writes = _writes_to_commands(rt, monkeypatch)
    result = await _run_local(rt, tmp_path, "true")
    assert result.state == "completed"
    assert writes == ["INSERT", "INSERT"]  # the start (with pid), the end (an upsert)
    await rt.journal.flush()
    rows = _rows(rt, "SELECT state, pid, exit_code, argv_json FROM commands")
    assert len(rows) == 1
    state, pid, code, argv = rows[0]
    assert (state, code, argv) == ("completed", 0, '["true"]') and pid


async def test_a_command_that_never_started_still_gets_its_row(
    rt: Runtime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writes = _writes_to_commands(rt, monkeypatch)
    result = await _run_local(rt, tmp_path, "no-such-program-tt")
    assert result.exit_code == 127
    assert writes == ["INSERT"]
    assert _rows(rt, "SELECT state, exit_code FROM commands") == [("error", 127)]
