"""Fixtures for the memory tests: a started MemoryService on a real SQLite file."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tenantry.core.events import Bus
from tenantry.core.models import AgentProduct, Principal
from tenantry.core.settings import load
from tenantry.memory import (
    FakeProber,
    Kind,
    Lesson,
    MemoryService,
    PartitionInfo,
    Scope,
    Source,
    Status,
    Trust,
)
from tenantry.memory.store import new_id
from tenantry.service.runtime import Runtime


def principal(
    user: str, session: str = "s1", *, project: str = "", human: bool = False
) -> Principal:
    agent = AgentProduct.HUMAN if human else AgentProduct.CLAUDE_CODE
    return Principal(uid=1000, user=user, agent=agent, session=session, project=project)


def new_lesson(
    title: str,
    body: str,
    *,
    kind: Kind = Kind.FACT,
    scope: Scope = Scope.FACILITY,
    trust: Trust = Trust.AGENT_OBSERVED,
    status: Status = Status.ACTIVE,
    owner_key: str = "ops/human/-",
    id: str = "",
) -> Lesson:
    """A stored-as-is lesson of ``owner_key`` (user/agent/session), with the source its
    trust implies (staff for staff-approved, else an agent); a fresh id unless given."""
    return Lesson(
        id=id or new_id(),
        kind=kind,
        scope=scope,
        title=title,
        body=body,
        owner_user=owner_key.split("/")[0],
        owner_key=owner_key,
        sources=[Source.STAFF if trust is Trust.STAFF_APPROVED else Source.AGENT],
        trust=trust,
        status=status,
    )


def facility_lesson(
    title: str, body: str, *, kind: Kind = Kind.FACT, trust: Trust = Trust.AGENT_OBSERVED
) -> Lesson:
    """An active facility-scope lesson owned by staff, with the source its trust implies."""
    return new_lesson(title, body, kind=kind, trust=trust)


async def remember_limit(
    svc: MemoryService,
    who: Principal,
    partition: str,
    *,
    title: str,
    body: str,
    ttl_days: float | None = None,
    **limits: int,
) -> Lesson:
    """A LIMIT lesson about ``partition`` that the partition_limit probe checks
    against ``limits`` (``max_time_s=...``, ``max_nodes=...``)."""
    return await svc.remember(
        who,
        title=title,
        body=body,
        kind=Kind.LIMIT,
        subject={"partition": partition},
        ttl_days=ttl_days,
        claim={"probe": "partition_limit", "partition": partition, **limits},
    )


def run_failing(daemon: Any, stderr: str, **kw: Any) -> dict[str, Any]:
    """A real failing ``tenantry run --json`` (through ``daemon.cli``) that writes
    ``stderr``; its JSON answer."""
    script = f"import sys; sys.stderr.write({stderr!r} + '\\n'); sys.exit(1)"
    r = daemon.cli("run", "--json", "--", "python3", "-c", script, **kw)
    assert r.returncode == 1, r.stderr
    out: dict[str, Any] = json.loads(r.stdout)
    return out


@pytest.fixture
def prober() -> FakeProber:
    return FakeProber(
        partitions={
            "debug": PartitionInfo("debug", max_time_s=1800, max_nodes=2, state="UP"),
            "gpu": PartitionInfo("gpu", max_time_s=86400, max_nodes=4, state="UP"),
        },
        modules={"gcc/12.2.0", "cuda/12.2", "openmpi/4.1.5"},
    )


@pytest.fixture
def runtime(state_dir: str) -> Runtime:
    settings = load(
        env={},
        overrides={
            "state_dir": state_dir,
            "memory_staff": "root,ops",
            "memory_verify_interval_s": 0.0,
        },
    )
    return Runtime(settings, journal=None, bus=Bus(), backend=None)  # type: ignore[arg-type]


@pytest.fixture
async def service(runtime: Runtime, prober: FakeProber) -> AsyncIterator[MemoryService]:
    svc = MemoryService(runtime, prober=prober)
    runtime.components["memory"] = svc
    await svc.start()
    try:
        yield svc
    finally:
        await svc.aclose()


PARAPHRASE_LESSONS = Path(__file__).parent / "data" / "paraphrase_lessons.jsonl"


def fixture_lessons() -> list[Lesson]:
    """The staff/probe-verified facility lessons of data/paraphrase_lessons.jsonl."""
    out = []
    for line in PARAPHRASE_LESSONS.read_text().splitlines():
        d = json.loads(line)
        trust = Trust(d["trust"])
        out.append(
            Lesson(
                id=d["id"],
                kind=Kind(d["kind"]),
                scope=Scope.FACILITY,
                title=d["title"],
                body=d["body"],
                owner_user="ops",
                owner_key="ops/human/-",
                subject=d["subject"],
                error_signature=d["error_signature"],
                sources=[Source.STAFF if trust is Trust.STAFF_APPROVED else Source.PROBE],
                trust=trust,
                status=Status.ACTIVE,
            )
        )
    return out
