"""What each arm runs for each command class, and the parsers of sdiag and sacct (recorded)."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

import day_arms
import day_slurm
from day_replay import Action, Actor
from tenantry.agents import steer
from tenantry.agents.products.common import HOOK_ENTRY

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "bench"
AGENT = Actor("a00", "agent", "s001", 0)
HUMAN = Actor("h00", "human", "", 0)


def _ctx(arm: str, **kw: str) -> day_arms.Context:
    return day_arms.Context(
        arm=arm,
        unix_user=f"tt-day{arm[0]}-a00",
        home="/w/home/u",
        workspace="/w/mnt/w00",
        scratch="/w/src/w00/scratch",
        tenantry=("/usr/bin/python3", "-m", "tenantry"),
        shim_dir="/w/shims",
        socket=kw.get("socket", "/w/state/u/sock"),
        files=("m00/p00/d00/f001.py",),
    )


def test_bare_runs_the_real_tools_and_one_slurm_job_per_test() -> None:
    ctx = _ctx("bare")
    find = day_arms.step_for(Action(1, "find", "*.py"), AGENT, ctx)
    assert find["argv"] == ["find", "/w/mnt/w00", "-name", "*.py"]
    grep = day_arms.step_for(Action(1, "grep", "TODO"), AGENT, ctx)
    assert grep["argv"][:2] == ["grep", "-rnE"]
    test = day_arms.step_for(Action(1, "test"), AGENT, ctx)
    assert test["argv"][0] == "srun" and "ttday-test" in test["argv"]
    assert not test.get("via_tenantry")
    assert day_arms.hook_for(AGENT, ctx) is None
    env = day_arms.env_for(AGENT, ctx)
    assert env["CLAUDECODE"] == "1" and "/w/shims" not in env["PATH"]


def test_tenantry_agents_use_the_index_leases_hook_and_shims() -> None:
    ctx = _ctx("tenantry")
    find = day_arms.step_for(Action(1, "find", "*.py"), AGENT, ctx)
    assert find["argv"][-4:] == ["find", "/w/mnt/w00", "--name", "*.py"]
    grep = day_arms.step_for(Action(1, "grep", "TODO"), AGENT, ctx)
    assert grep["argv"][3:] == ["grep", "-n", "TODO", "/w/mnt/w00"]
    test = day_arms.step_for(Action(1, "test"), AGENT, ctx)
    assert test["argv"][3:7] == ["run", "--where", "lease", "--"]
    assert test["via_tenantry"] is True
    # sbatch: the bare command, which the daemon's hook submits itself; where the hook
    # redirects it instead, the agent runs the `tenantry submit` the redirect names
    sbatch = day_arms.step_for(Action(1, "sbatch", "12.0"), AGENT, ctx)
    bare = day_arms.step_for(Action(1, "sbatch", "12.0"), AGENT, _ctx("bare"))
    assert sbatch["argv"] == bare["argv"]
    assert steer.redirect(shlex.join(sbatch["argv"])).rule == "redirect.sbatch"  # type: ignore[union-attr]
    fallback = sbatch["fallback"]
    assert fallback[3] == "submit" and fallback[-2:] == ["/w/home/u/job.sh", "12.0"]
    # the http hook alone answers it, as Claude Code's `if` filter leaves the
    # fallback command hook out; a refused rm -rf runs that hook too
    assert sbatch["hook_if"] is False
    assert day_arms.step_for(Action(1, "danger"), AGENT, ctx)["hook_if"] is True
    # squeue/sacct: the forms the hook answers itself from the status cache
    for cls in ("squeue", "sacct"):
        argv = day_arms.step_for(Action(1, cls), AGENT, ctx)["argv"]
        assert argv[0] == cls
        assert steer.answerable(shlex.join(argv), "u") is not None, argv
    git = day_arms.step_for(Action(1, "git"), AGENT, ctx)["argv"]
    assert git[3:] == ["git", "-C", "/w/mnt/w00", "--no-optional-locks", "status", "--porcelain"]
    env = day_arms.env_for(AGENT, ctx)
    assert env["PATH"].startswith("/w/shims:")
    assert env["TENANTRY_SOCKET"] == "/w/state/u/sock" and env["TENANTRY_AUTOSTART"] == "0"
    # what `tenantry install` writes for a user's own settings: the script without `site`
    assert day_arms.hook_for(AGENT, ctx) == [
        ctx.tenantry[0], "-I", "-S", HOOK_ENTRY, "hook", "--agent", "claude-code",
    ]  # fmt: skip


def test_bare_sbatch_submits_the_same_script() -> None:
    argv = day_arms.step_for(Action(1, "sbatch", "12.0"), AGENT, _ctx("bare"))["argv"]
    assert argv[0] == "sbatch" and argv[-2:] == ["/w/home/u/job.sh", "12.0"]
    assert day_arms.JOB_SCRIPT_TEXT.startswith("#!")


def test_humans_run_the_same_commands_in_both_arms() -> None:
    for cls in ("ls", "read", "git", "sbatch", "squeue", "sacct"):
        bare = day_arms.step_for(Action(1, cls, "1"), HUMAN, _ctx("bare"))
        ten = day_arms.step_for(Action(1, cls, "1"), HUMAN, _ctx("tenantry", socket=""))
        assert bare == ten, cls
    ctx = _ctx("tenantry", socket="")
    assert day_arms.hook_for(HUMAN, ctx) is None
    assert "CLAUDECODE" not in day_arms.env_for(HUMAN, ctx)


def test_edits_are_writes_not_commands() -> None:
    step = day_arms.step_for(Action(3, "edit"), AGENT, _ctx("tenantry"))
    assert step == {"t": 3, "cls": "edit", "write": "/w/src/w00/scratch/tenantry-s001.py"}


def test_every_class_has_a_command() -> None:
    from day_replay import CLASSES

    for arm in ("bare", "tenantry"):
        for cls in CLASSES:
            step = day_arms.step_for(Action(0, cls, "1"), AGENT, _ctx(arm))
            assert "argv" in step or "write" in step
    with pytest.raises(ValueError, match="no command"):
        day_arms.step_for(Action(0, "nosuch"), AGENT, _ctx("bare"))


def test_sdiag_users_from_recorded_output() -> None:
    counts = day_slurm.parse_sdiag_users((FIX / "sdiag.out").read_text())
    assert counts["root"] > 0
    assert all(isinstance(v, int) and v >= 0 for v in counts.values())
    assert day_slurm.parse_sdiag_users("no such section") == {}


def test_rpc_counter_survives_a_reset_by_someone_else() -> None:
    c = day_slurm.RpcCounter(["u1", "u2"])
    c.sample({"u1": 100, "u2": 5, "other": 9})
    c.sample({"u1": 130, "u2": 5})
    c.sample({"u1": 4})  # sdiag -r in between: 4 new RPCs, u2 gone from the table
    c.sample({"u1": 10, "u2": 2})
    assert c.total == {"u1": 30 + 4 + 6, "u2": 0 + 2}
    assert c.resets == 2
    assert c.sum(["u1"]) == 40


def test_sacct_dump_from_recorded_output() -> None:
    jobs = day_slurm.parse_sacct((FIX / "sacct-day.txt").read_text())
    assert jobs, "the recorded dump has allocations"
    assert all(j.user.startswith("tt-day") for j in jobs)
    assert all(j.cpus >= 1 and j.elapsed_s >= 0 for j in jobs)
    assert day_slurm.parse_sacct("") == []
