"""Probe parsers on recorded Slurm 22.05 output, and the real probes on the dev Slurm."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from tenantry.memory import MemoryService, SlurmProber, Status
from tenantry.memory.probes import (
    ProbeUnavailable,
    parse_scontrol_partition,
    parse_sinfo_json,
    sbatch_test_argv,
)
from tenantry.memory.verify import check

from ..conftest import stand_in
from .conftest import principal, remember_limit

DATA = Path(__file__).parent / "data"


def test_scontrol_partition_recorded() -> None:
    info = parse_scontrol_partition((DATA / "scontrol_partition_debug.txt").read_text())
    assert info is not None
    assert (info.name, info.max_time_s, info.default_time_s, info.max_nodes, info.state) == (
        "debug",
        3600,
        600,
        None,
        "UP",
    )
    assert parse_scontrol_partition("") is None


def test_sinfo_22_05_json_has_no_partition_limits() -> None:
    # Slurm 22.05's `sinfo --json` lists nodes only: the prober falls back to scontrol.
    data = json.loads((DATA / "sinfo_22.05.json").read_text())
    assert data["meta"]["Slurm"]["release"].startswith("22.05")
    assert parse_sinfo_json(data) == {}


def test_sbatch_test_argv_is_a_list_of_flags() -> None:
    argv = sbatch_test_argv(
        {"partition": "gpu; rm -rf /", "time_s": 7200, "gpus": 2, "mem_mb": 4000}
    )
    assert argv[:2] == ["sbatch", "--test-only"]
    assert "--partition=gpu; rm -rf /" in argv  # one argv element, never a shell string
    assert "--time=120" in argv and "--gres=gpu:2" in argv and "--mem=4000M" in argv


async def test_missing_tools_make_probes_inconclusive() -> None:
    prober = SlurmProber(env={"PATH": "/nonexistent"})
    with pytest.raises(ProbeUnavailable):
        await prober.partition("debug")
    out = await check({"probe": "module_exists", "module": "gcc"}, prober)
    assert out.result == "inconclusive"


@pytest.mark.slurm
async def test_real_slurm_partition_and_test_only(slurm: None) -> None:
    prober = SlurmProber(timeout_s=20)
    info = await prober.partition("debug")
    assert info is not None and info.max_time_s and info.max_time_s > 0
    assert await prober.partition("no-such-partition-xyz") is None
    too_long = await prober.test_submit(
        {"partition": "debug", "time_s": info.max_time_s + 3600}, ""
    )
    assert not too_long.accepted and "time limit" in too_long.message.lower()
    # the shared dev Slurm is sometimes mid-reconfiguration: poll with a deadline
    deadline = time.monotonic() + 30
    fits = await prober.test_submit({"partition": "debug", "time_s": 60}, "")
    while not fits.accepted and time.monotonic() < deadline:
        await asyncio.sleep(0.5)
        fits = await prober.test_submit({"partition": "debug", "time_s": 60}, "")
    assert fits.accepted, fits.message


@pytest.mark.slurm
async def test_real_probe_marks_a_stale_limit(slurm: None, runtime) -> None:  # type: ignore[no-untyped-def]
    svc = MemoryService(runtime, prober=SlurmProber(timeout_s=20))
    await svc.start()
    try:
        info = await svc.prober.partition("debug")
        assert info is not None and info.max_time_s
        alice = principal("alice")
        wrong = await remember_limit(
            svc,
            alice,
            "debug",
            title="debug partition allows 2x its real limit",
            body="old limit",
            max_time_s=info.max_time_s * 2,
        )
        right = await remember_limit(
            svc,
            alice,
            "debug",
            title="debug partition limit",
            body="current limit",
            max_time_s=info.max_time_s,
        )
        assert (await svc.verify_one(wrong.id))["result"] == "fail"
        assert (await svc.verify_one(right.id))["result"] == "pass"
        assert (await svc.store.require(wrong.id)).status is Status.STALE
        assert (await svc.store.require(right.id)).trust.value == "probe-verified"
    finally:
        await svc.aclose()


# -- SlurmProber against stand-in executables on PATH (real subprocesses) -----------


def _number(n: int) -> dict[str, Any]:
    """A number as ``sinfo --json`` prints it from Slurm 23.11 on."""
    return {"set": True, "infinite": False, "number": n}


INFINITE = {"set": True, "infinite": True, "number": 0}
UNSET = {"set": False, "infinite": False, "number": 0}


def _partition(name: str, **limits: dict[str, Any]) -> dict[str, Any]:
    """One partition of ``sinfo --json`` (23.11+), up, with its ``maximums``/``defaults``."""
    return {"partition": {"name": name, "partition": {"state": ["UP"]}, **limits}}


SINFO_2311 = {
    "sinfo": [
        _partition(
            "gpu",
            maximums={"time": _number(1440), "nodes": _number(4)},
            defaults={"time": _number(60)},
        ),
        _partition("long", maximums={"time": INFINITE, "nodes": UNSET}),
    ]
}


def test_sinfo_newer_layout_is_parsed() -> None:
    # the shape of `sinfo --json` from Slurm 23.11+ (abbreviated, hand-written)
    parts = parse_sinfo_json(SINFO_2311)
    assert parts["gpu"].max_time_s == 86400 and parts["gpu"].max_nodes == 4
    assert parts["gpu"].default_time_s == 3600 and parts["gpu"].state == "UP"
    assert parts["long"].max_time_s is None and parts["long"].max_nodes is None


async def test_prober_uses_sinfo_json_then_scontrol(tmp_path: Path) -> None:
    (tmp_path / "sinfo.json").write_text(json.dumps(SINFO_2311))
    stand_in(tmp_path, "sinfo", f'cat "{tmp_path}/sinfo.json"\n')
    prober = SlurmProber(env={"PATH": f"{tmp_path}:/usr/bin:/bin"})
    info = await prober.partition("gpu")
    assert info is not None and info.max_time_s == 86400
    # sinfo knows partitions but not this one: it does not exist
    assert await prober.partition("nosuch") is None
    # 22.05: sinfo --json has no partitions -> scontrol
    (tmp_path / "sinfo.json").write_text((DATA / "sinfo_22.05.json").read_text())
    recorded = DATA / "scontrol_partition_debug.txt"
    stand_in(
        tmp_path,
        "scontrol",
        f'if [ "$3" = debug ]; then cat "{recorded}"; '
        'else echo "Partition $3 not found" >&2; exit 1; fi\n',
    )
    info = await prober.partition("debug")
    assert info is not None and info.max_time_s == 3600
    assert await prober.partition("gone") is None


async def test_prober_timeouts_and_lmod(tmp_path: Path) -> None:
    stand_in(tmp_path, "sinfo", "sleep 30\n")
    prober = SlurmProber(timeout_s=0.3, env={"PATH": f"{tmp_path}:/usr/bin:/bin"})
    with pytest.raises(ProbeUnavailable, match="timed out"):
        await prober.partition("debug")
    stand_in(
        tmp_path,
        "lmod",
        'case "$4" in gcc/12.2.0) echo "gcc/12.2.0" >&2;;'
        ' *) echo "Unable to find: \\"$4\\"" >&2;; esac\n',
    )
    lmod = SlurmProber(
        env={"PATH": f"{tmp_path}:/usr/bin:/bin", "LMOD_CMD": str(tmp_path / "lmod")}
    )
    assert await lmod.module_exists("gcc/12.2.0") is True
    assert await lmod.module_exists("gcc/99") is False
    stand_in(
        tmp_path,
        "sbatch",
        'cat >/dev/null; echo "sbatch: error: Invalid qos specification" >&2; exit 1\n',
    )
    check = await lmod.test_submit({"partition": "gpu"}, "")
    assert not check.accepted and "qos" in check.message
