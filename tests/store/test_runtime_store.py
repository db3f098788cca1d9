"""The daemon's runtime on each engine: every concept migrates into one store."""

from __future__ import annotations

from pathlib import Path

import pytest

from tenantry.backends.fake import FakeBackend
from tenantry.core.models import Principal
from tenantry.core.settings import load
from tenantry.gateway.app import open_runtime
from tenantry.memory.component import MemoryService
from tenantry.memory.models import Kind, Lesson, Scope
from tenantry.memory.store import new_id
from tenantry.safety.kill.component import KillSwitch


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest) -> str:
    return "" if request.param == "sqlite" else str(request.getfixturevalue("pg_url"))


async def test_the_runtime_keeps_its_state_in_the_one_store(tmp_path: Path, store_url: str) -> None:
    settings = load(
        env={},
        overrides={
            "state_dir": str(tmp_path / "state"),
            "backend": "fake",
            "policy_file": "",
            "store_url": store_url,
        },
    )
    staff = Principal(0, "root")
    async with open_runtime(settings, FakeBackend()) as rt:
        assert rt.store.engine == ("postgresql" if store_url else "sqlite")
        await rt.component("kill", KillSwitch).stop(
            "user", "bob", by=staff, owner="*", reason="runaway"
        )
        memory = rt.component("memory", MemoryService)
        await memory.store.add(
            Lesson(new_id(), Kind.FACT, Scope.FACILITY, "gcc", "load gcc", "root", staff.key),
            staff.key,
        )
        assert [x["title"] for x in await memory.list_lessons(staff, kind="fact")] == ["gcc"]
        assert len(await memory.export(staff, scope="facility")) == 1
        rows = await rt.store.fetchall("SELECT DISTINCT concept FROM schema_migrations")
        assert {r[0] for r in rows} == {"journal", "kill", "budgets", "memory", "leases"}
    files = sorted(p.name for p in (tmp_path / "state").iterdir() if ".sqlite3" in p.name)
    expected = {"index.sqlite3"} | ({"tenantry.sqlite3"} if not store_url else set())
    assert {f for f in files if f.endswith(".sqlite3")} == expected
    async with open_runtime(settings, FakeBackend()) as rt:
        stops = rt.component("kill", KillSwitch).list_stopped()
        assert [(s["target"], s["reason"]) for s in stops] == [("bob", "runaway")]
