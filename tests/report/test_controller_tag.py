"""job_submit.lua: the controller-side AdminComment tag, in Lua and on the real Slurm."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest

from tenantry.backends.slurm import SlurmBackend
from tenantry.core.models import AgentProduct, JobSpec, Principal, Resources
from tenantry.core.settings import load
from tenantry.report import classify, ingest_sacct, metrics, sources

from . import lua51

SBATCH = ["sbatch", "--parsable", "-t", "2", "-o", "/dev/null"]
PLUGIN = Path(ingest_sacct.__file__).parent / "slurm" / "job_submit.lua"


def _submit(env: dict[str, str] | None, comment: str | None, admin: str | None = None) -> str:
    lib = lua51.load_library()
    if lib is None:
        pytest.skip("liblua5.1 is not installed (Debian: liblua5.1-0, a slurmctld dependency)")
    env_table = (
        "nil" if env is None else "{" + ", ".join(f'["{k}"] = "{v}"' for k, v in env.items()) + "}"
    )

    def lit(v: str | None) -> str:
        return "nil" if v is None else "[==[" + v + "]==]"

    chunk = f"""
slurm = {{SUCCESS = 0, ERROR = -1, log_info = function(...) end}}
assert(loadstring({lit(PLUGIN.read_text())}))()
local env = {env_table}
local job = {{comment = {lit(comment)}, admin_comment = {lit(admin)}}}
if env ~= nil then
  job.environment = setmetatable({{}}, {{__index = function(t, k) return env[k] end}})
end
local rc = slurm_job_submit(job, {{}}, 0)
return tostring(rc) .. "#" .. tostring(job.admin_comment)
"""
    return lua51.run(lib, chunk)


def test_lua_tags_markers_and_tenantry_jobs() -> None:
    assert _submit({"CODEX_THREAD_ID": "t1", "PATH": "/bin"}, None) == (
        "0#tenantry-ctld:v1;via=direct;markers=CODEX_THREAD_ID"
    )
    assert _submit({"PATH": "/bin"}, "tenantry:v1;agent=codex;session=s") == (
        "0#tenantry-ctld:v1;via=tenantry;markers="
    )
    # srun/salloc send no environment: no markers, still tagged
    assert _submit(None, None) == "0#tenantry-ctld:v1;via=direct;markers="
    # CLAUDECODE=0 is not a marker; several markers are all listed
    assert _submit({"CLAUDECODE": "0", "GEMINI_CLI": "1", "OPENCODE": "1"}, None) == (
        "0#tenantry-ctld:v1;via=direct;markers=GEMINI_CLI,OPENCODE"
    )


def test_lua_keeps_admin_text_and_replaces_its_own_old_tag() -> None:
    got = _submit({}, None, admin="site note tenantry-ctld:v1;via=tenantry;markers=X")
    assert got == "0#site note tenantry-ctld:v1;via=direct;markers="


def test_lua_markers_match_the_report() -> None:
    text = PLUGIN.read_text()
    for name in classify.MARKERS:
        assert f'"{name}"' in text, name


def test_lua_never_rejects_a_job_on_error() -> None:
    # an environment whose lookup raises: the job passes, tagged as an error
    lib = lua51.load_library()
    if lib is None:
        pytest.skip("liblua5.1 is not installed")
    chunk = (
        "slurm = {SUCCESS = 0, log_info = function(...) end}\n"
        f"assert(loadstring([==[{PLUGIN.read_text()}]==]))()\n"
        "local job = {environment = setmetatable({}, {__index = function() error('boom') end})}\n"
        "job.comment = setmetatable({}, {})\n"
        "local rc = slurm_job_submit(job, {}, 0)\n"
        "return tostring(rc) .. '#' .. tostring(job.admin_comment)\n"
    )
    assert lua51.run(lib, chunk) == "0#tenantry-ctld:v1;via=unknown;markers=;error=1"


# --- the real Slurm -------------------------------------------------------------------


def _lua_enabled() -> bool:
    out = subprocess.run(
        ["scontrol", "show", "config"], capture_output=True, text=True, timeout=30, check=False
    ).stdout
    return any(
        line.split("=", 1)[0].strip() == "JobSubmitPlugins" and "lua" in line
        for line in out.splitlines()
    )


def _wait(cond: Callable[[], bool], what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"{what} within {timeout} s"
        time.sleep(0.2)


def _sacct_fields(ids: str, fields: str, check: bool) -> list[str]:
    """``sacct -n -X -P`` lines of these jobs with these fields."""
    return subprocess.run(
        ["sacct", "-n", "-X", "-P", "-j", ids, "-o", fields],
        capture_output=True,
        text=True,
        timeout=30,
        check=check,
    ).stdout.split()


@pytest.mark.slurm
def test_real_slurm_tags_direct_agent_job_and_tenantry_job(slurm: None, tmp_path: Path) -> None:
    if not _lua_enabled():
        msg = "slurmctld runs without job_submit.lua; start it with scripts/dev-slurm start"
        if os.environ.get("TENANTRY_REQUIRE_SLURM") == "1":
            pytest.fail(msg)
        pytest.skip(msg)
    clean = {k: v for k, v in os.environ.items() if k not in classify.MARKERS}
    # 1. a job that bypasses Tenantry, submitted from an agent's shell
    direct = subprocess.run(
        [*SBATCH, f"--chdir={tmp_path}", "-J", "ctld-direct", "--wrap", "true"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
        env={**clean, "CLAUDECODE": "1"},
    ).stdout.strip()
    # 2. a job through Tenantry's own Slurm backend (the daemon's submit path)
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/bash\ntrue\n")
    spec = JobSpec(
        script=str(script),
        script_text=script.read_text(),
        cwd=str(tmp_path),
        resources=Resources(cpus=1, time_s=120),
        name="ctld-tenantry",
    )
    principal = Principal(
        uid=os.getuid(), user="tester", agent=AgentProduct.CODEX, session="ctld-1", host="h"
    )
    settings = load(env={}, overrides={"state_dir": str(tmp_path / "state"), "backend": "slurm"})

    async def via_tenantry() -> str:
        backend = SlurmBackend(settings)
        await backend.start()
        try:
            return (await backend.submit(spec, principal, "t-ctld")).backend_id
        finally:
            await backend.aclose()

    saved = {k: os.environ.pop(k) for k in list(os.environ) if k in classify.MARKERS}
    try:
        through = asyncio.run(via_tenantry())
    finally:
        os.environ.update(saved)
    ids = f"{direct},{through}"

    def recorded() -> bool:
        out = _sacct_fields(ids, "State,Partition", check=False)
        return len(out) == 2 and all(r.split("|")[0] == "COMPLETED" and "|" in r for r in out)

    _wait(recorded, "both jobs completed and recorded")
    dump = tmp_path / "all.txt"
    with dump.open("w") as fh:
        subprocess.run(
            ["sacct", "--allusers", "--parsable2", "--allocations", "--format=ALL", "-j", ids],
            stdout=fh,
            timeout=30,
            check=True,
            env={**clean, "TZ": "UTC"},
        )
    tags = _sacct_fields(ids, "JobID,AdminComment", check=True)
    admin = dict(line.split("|", 1) for line in tags)
    assert admin[direct] == "tenantry-ctld:v1;via=direct;markers=CLAUDECODE"
    assert admin[through] == "tenantry-ctld:v1;via=tenantry;markers="
    # the report attributes both, each on its own evidence
    data = sources.load([dump])
    ev = classify.job_evidence(data.jobs).select("job_id", "job_direct", "job_basis")
    got = {r[0]: (r[1], r[2]) for r in ev.iter_rows()}
    assert got[direct] == ("agent", "controller")
    assert got[through] == ("agent", "tag")
    report = metrics.build(data)
    assert report["headline"]["submissions"]["share_pct"]["agent"] == 100.0
    users = metrics.users_table(data).filter(pl.col("class") == "agent")
    assert users.height == 1
    # sacct --json carries the same tag (comment.administrator)
    doc = tmp_path / "all.json"
    with doc.open("w") as fh:
        subprocess.run(["sacct", "--json", "-j", ids], stdout=fh, timeout=30, check=True)
    ev_json = classify.job_evidence(sources.load([doc]).jobs)
    got_json = {r[0]: r[1] for r in ev_json.select("job_id", "job_basis").iter_rows()}
    assert got_json == {direct: "controller", through: "tag"}
