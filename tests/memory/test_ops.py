"""The memory ops in-process (same OpContext the daemon builds), and the CLI surface."""

from __future__ import annotations

import subprocess
import sys

import pytest

import tenantry.memory as memory
from tenantry.core.errors import PermissionDenied, UsageError
from tenantry.memory import MemoryService, ops
from tenantry.service.ops import REGISTRY, OpContext
from tenantry.service.runtime import Runtime

from .conftest import principal

NAMES = ["recall", "remember", "show", "supersede", "retract", "approve", "list", "verify"]


def test_ops_are_registered_with_policy_actions() -> None:
    for name in NAMES:
        op = REGISTRY[f"memory.{name}"]
        assert op.action and op.action.startswith("memory."), name
    assert "BEFORE" in ops.RECALL_DESCRIPTION and "not instructions" in ops.RECALL_DESCRIPTION
    assert "supersede" in ops.REMEMBER_DESCRIPTION and "quarantined" in ops.REMEMBER_DESCRIPTION


def test_tool_schemas_name_real_params() -> None:
    assert set(ops.RECALL_SCHEMA["required"]) == {"query"}
    assert set(ops.REMEMBER_SCHEMA["properties"]) >= {"title", "body", "kind", "scope", "claim"}
    kinds = ops.REMEMBER_SCHEMA["properties"]["kind"]["enum"]
    assert kinds == [k.value for k in memory.Kind]


def test_public_api_is_explicit() -> None:
    for name in memory.__all__:
        assert hasattr(memory, name), name


async def test_remember_recall_roundtrip_through_ops(
    service: MemoryService, runtime: Runtime
) -> None:
    ctx = OpContext(principal("alice", project="chem"), runtime)
    out = await ops.remember(
        ctx,
        {
            "title": "HDF5 locking on Lustre",
            "body": "export HDF5_USE_FILE_LOCKING=FALSE",
            "kind": "failure-fix",
            "subject": {"package": "hdf5"},
            "error_signature": "unable to lock file, errno = 38",
            "claim": {"probe": "module_exists", "module": "gcc/12.2.0"},
        },
    )
    assert out["quarantined"] is False and out["note"] == "stored"
    got = await ops.recall(ctx, {"query": "H5Fopen(): unable to lock file, errno = 38, 'x.h5'"})
    assert got["lessons"][0]["id"] == out["lesson"]["id"]
    assert "never obey" in got["note"]
    shown = await ops.show(ctx, {"id": out["lesson"]["id"]})
    assert shown["history"][0]["action"] == "created"
    # the claim (a module exists) says nothing about this lesson's fix: it cannot verify it
    res = await ops.verify(ctx, {"id": out["lesson"]["id"]})
    assert res["results"][0]["result"] == "inconclusive"
    assert "not bound" in res["results"][0]["detail"]
    listed = await ops.list_(ctx, {"mine": True})
    assert [x["id"] for x in listed["lessons"]] == [out["lesson"]["id"]]


@pytest.mark.parametrize(
    "params",
    [
        {"title": "t"},
        {"title": "t", "body": "b", "kind": "rumour"},
        {"title": "t", "body": "b", "subject": {"colour": "red"}},
        {"title": "t", "body": "b", "claim": {"probe": "rm -rf"}},
        {"title": "t", "body": "b", "derived_from": ["staff"]},
        {"title": "t", "body": "b", "ttl_days": -1},
    ],
)
async def test_bad_params_are_usage_errors(
    service: MemoryService, runtime: Runtime, params: dict[str, object]
) -> None:
    with pytest.raises(UsageError):
        await ops.remember(OpContext(principal("alice"), runtime), params)


async def test_sweep_is_staff_only(service: MemoryService, runtime: Runtime) -> None:
    with pytest.raises(PermissionDenied):
        await ops.verify(OpContext(principal("alice"), runtime), {})
    out = await ops.verify(OpContext(principal("ops", human=True), runtime), {})
    assert out == {"results": []}
    with pytest.raises(UsageError):
        await ops.recall(OpContext(principal("alice"), runtime), {"query": "  "})


def test_cli_help_teaches_with_examples() -> None:
    r = subprocess.run(
        [sys.executable, "-m", "tenantry", "memory", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0
    for verb in ("search", "add", "show", "supersede", "retract", "approve", "list"):
        assert f"tenantry memory {verb}" in r.stdout, verb
