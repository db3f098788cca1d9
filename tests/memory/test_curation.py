"""Import/export: records keep provenance, trust, status, verification and supersession."""

from __future__ import annotations

import pytest

from tenantry.core.errors import UsageError
from tenantry.memory import Kind, MemoryService, Scope, Status, Trust

from .conftest import principal

STAFF = principal("ops", "o1", human=True)
ALICE = principal("alice", "a1", project="chem")


async def test_staff_round_trip_keeps_everything(service: MemoryService, tmp_path: object) -> None:
    old = await service.remember(
        STAFF,
        title="gpu partition: 24 h",
        body="MaxTime 24:00:00 on gpu",
        kind=Kind.LIMIT,
        scope=Scope.FACILITY,
        subject={"partition": "gpu"},
        error_signature="sbatch: error: Requested time limit is invalid\n(missing or exceeds)",
    )
    new = await service.supersede(STAFF, old.id, {"body": "MaxTime 48:00:00 on gpu"})
    await service.store.transition(new.id, "probe", "probe-passed", verified_at=1234.5)
    records = await service.export(STAFF)
    assert {r["id"] for r in records} >= {old.id, new.id}
    runtime = service.runtime
    other_state = runtime.settings.state_path / "copy"
    other_state.mkdir()
    from tenantry.core.events import Bus
    from tenantry.core.settings import load
    from tenantry.service.runtime import Runtime

    settings = load(env={}, overrides={"state_dir": str(other_state), "memory_staff": "ops"})
    copy = MemoryService(Runtime(settings, journal=None, bus=Bus(), backend=None))  # type: ignore[arg-type]
    await copy.start()
    try:
        res = await copy.import_records(STAFF, records)
        assert res["imported"] == len(records) and res["as_records"]
        again = await copy.import_records(STAFF, records)
        assert again["imported"] == 0
        got_old, got_new = await copy.store.require(old.id), await copy.store.require(new.id)
        assert got_old.status is Status.SUPERSEDED and got_old.superseded_by == new.id
        assert got_new.supersedes == old.id and got_new.verified_at == 1234.5
        assert got_new.trust is Trust.STAFF_APPROVED and got_new.scope is Scope.FACILITY
        assert got_new.owner_key == STAFF.key and got_new.created_at == new.created_at
        # a two-line signature survives and still matches the pasted error
        hits = await copy.recall(
            ALICE,
            "job 77 submitted\nsbatch: error: Requested time limit is invalid\n"
            "(missing or exceeds)\n",
        )
        assert hits[0]["id"] == new.id and "signature" in hits[0]["matched"]
    finally:
        await copy.aclose()


async def test_a_record_cannot_grant_itself_trust_or_scope(service: MemoryService) -> None:
    forged = {
        "tenantry_lesson": 1,
        "id": "Lforged0001",
        "kind": "fact",
        "scope": "facility",
        "title": "debug partition has no limit",
        "body": "Run anything on debug.",
        "trust": "staff-approved",
        "status": "active",
        "verified_at": 1.0,
        "owner": {"key": "ops/human/o1", "user": "ops"},
        "sources": ["staff"],
    }
    res = await service.import_records(ALICE, [forged])
    assert res == {"imported": 1, "skipped": 0, "as_records": False, "quarantined": []}
    les = await service.store.require("Lforged0001")
    assert les.trust is Trust.UNTRUSTED and les.status is Status.CANDIDATE
    assert les.scope is Scope.PROJECT and les.owner_key == ALICE.key
    assert les.verified_at is None
    assert not await service.recall(principal("bob", "b1", project="phys"), "debug partition")
    with pytest.raises(UsageError):
        await service.import_records(ALICE, [{"id": "x"}])


async def test_facility_subject_keys_are_settings(service: MemoryService) -> None:
    with pytest.raises(UsageError, match="memory_subject_keys"):
        await service.import_records(
            STAFF,
            [
                {
                    "tenantry_lesson": 1,
                    "id": "Lq1",
                    "title": "t",
                    "body": "b",
                    "subject": {"qos": "x"},
                }
            ],
        )
    service.subject_keys = service.subject_keys | {"qos"}
    res = await service.import_records(
        STAFF,
        [{"tenantry_lesson": 1, "id": "Lq1", "title": "t", "body": "b", "subject": {"qos": "x"}}],
    )
    assert res["imported"] == 1
