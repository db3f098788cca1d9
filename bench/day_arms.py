"""What each command class of the day is, on each arm. Pure: argv lists and environments.

- ``bare``: the real clients, as agents use them today: ``find``/``grep -r``/
  ``git status`` on the workspace, one ``srun`` job per test run, ``sbatch``,
  ``squeue``/``sacct`` polling.
- ``tenantry``: the agent's Tenantry surfaces: its pre-tool hook before every
  command (``tenantry hook --agent claude-code``) and the commands the hook
  and the installed agent rules steer it to: ``sbatch``, ``squeue --me`` and
  ``sacct -X`` answered by the hook itself (the daemon submits the job, or
  lists the shared status cache; ``tenantry submit`` where the hook redirects
  an ``sbatch`` instead), ``tenantry
  git status`` (git asking the index's change feed) for ``git status``,
  ``tenantry find``/``grep`` (the index) for raw searches, ``tenantry run
  --where lease`` for test runs. The PATH shims are first on PATH too (for a
  Slurm client the agent calls anyway). Humans run the same commands in both
  arms (through the shims, which hand people the real binary).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from day_replay import Action, Actor
from tenantry.agents.products.claude_code import fallback_runs
from tenantry.agents.products.common import HOOK_ENTRY

TEST_CODE = "import time; time.sleep(0.3); print('2 passed')"
JOB_PREFIX = "ttday"
JOB_SCRIPT = "job.sh"  # in each actor's home: sleeps for its first argument
JOB_SCRIPT_TEXT = '#!/bin/sh\n# a small batch job of the facility day\nsleep "${1:-10}"\n'


def _cpus(actor: Actor) -> str:
    return "4" if actor.kind == "human" else "1"


@dataclass(frozen=True, slots=True)
class Context:
    arm: str  # bare | tenantry
    unix_user: str
    home: str
    workspace: str  # the actor's workspace on the FUSE mount
    scratch: str  # where edits are written (the workspace's writable source)
    tenantry: tuple[str, ...]  # argv prefix that runs the `tenantry` CLI
    pythonpath: str = ""  # finds Tenantry for that interpreter
    shim_dir: str = ""
    socket: str = ""  # the user's daemon socket (tenantry arm, agents)
    files: tuple[str, ...] = ()  # readable files of the workspace, relative


def env_for(actor: Actor, ctx: Context) -> dict[str, str]:
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": ctx.home,
        "USER": ctx.unix_user,
        "LOGNAME": ctx.unix_user,
        "LANG": "C.UTF-8",
        "TZ": "UTC",
        # the workspaces are owned by the bench, not by the actors
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "safe.directory",
        "GIT_CONFIG_VALUE_0": "*",
    }
    if ctx.pythonpath:
        env["PYTHONPATH"] = ctx.pythonpath
    if actor.kind == "agent":  # what Claude Code sets in the shell it starts
        env.update(CLAUDECODE="1", CLAUDE_CODE_SESSION_ID=f"{ctx.unix_user}-{actor.session}")
    if ctx.arm == "tenantry":
        env["PATH"] = f"{ctx.shim_dir}:{env['PATH']}"
        if ctx.socket:
            env.update(TENANTRY_SOCKET=ctx.socket, TENANTRY_AUTOSTART="0")
    return env


def _batch_job(act: Action, ctx: Context, actor: Actor) -> list[str]:
    """The batch job's options and script: the same for ``sbatch`` and ``tenantry submit``."""
    out = f"{ctx.home}/job-%j.out"
    return ["-J", f"{JOB_PREFIX}-job", "-t", "2", "-c", _cpus(actor), "--mem", "64M",
            "-o", out, f"{ctx.home}/{JOB_SCRIPT}", act.arg or "10"]  # fmt: skip


def _common(act: Action, ctx: Context, actor: Actor) -> list[str] | None:
    ws = ctx.workspace
    match act.cls:
        case "ls":
            return ["ls", "-la", f"{ws}/{act.arg}"]
        case "read":
            name = ctx.files[int(act.arg) % len(ctx.files)] if ctx.files else ".gitignore"
            return ["head", "-n", "60", f"{ws}/{name}"]
        case "git":
            return ["git", "-C", ws, "--no-optional-locks", "status", "--porcelain"]
        case "sbatch":
            return ["sbatch", "--parsable", *_batch_job(act, ctx, actor)]
        case "squeue":
            return ["squeue", "--me"]
        case "sacct":
            return ["sacct", "-X", "-n", "-S", "now-1hours"]
        case "danger":
            return ["rm", "-rf", f"{ctx.home}/build-{actor.session or 'h'}"]
    return None


def step_for(act: Action, actor: Actor, ctx: Context) -> dict[str, Any]:
    """One runner step (``bench/day_runner.py``) for an action on this arm."""
    step: dict[str, Any] = {"t": act.t, "cls": act.cls}
    if act.cls == "edit":
        step["write"] = f"{ctx.scratch}/{ctx.arm}-{actor.session or ctx.unix_user}.py"
        return step
    tenantry_agent = ctx.arm == "tenantry" and actor.kind == "agent"
    if tenantry_agent and act.cls == "find":
        step["argv"] = [*ctx.tenantry, "find", ctx.workspace, "--name", act.arg]
    elif tenantry_agent and act.cls == "grep":
        step["argv"] = [*ctx.tenantry, "grep", "-n", act.arg, ctx.workspace]
    elif tenantry_agent and act.cls == "sbatch":  # the hook submits it, else its redirect
        step["argv"] = ["sbatch", "--parsable", *_batch_job(act, ctx, actor)]
        step["fallback"] = [*ctx.tenantry, "submit", *_batch_job(act, ctx, actor)]
    elif tenantry_agent and act.cls == "squeue":  # the hook answers it from the status cache
        step["argv"] = ["squeue", "--me"]
    elif tenantry_agent and act.cls == "sacct":  # the form the hook answers (all own jobs)
        step["argv"] = ["sacct", "-X"]
    elif tenantry_agent and act.cls == "git":  # what the hook steers git status to
        step["argv"] = [*ctx.tenantry, "git", "-C", ctx.workspace, "--no-optional-locks",
                        "status", "--porcelain"]  # fmt: skip
    elif tenantry_agent and act.cls == "test":
        step["argv"] = [*ctx.tenantry, "run", "--where", "lease", "--", "python3", "-c", TEST_CODE]
        step["via_tenantry"] = True
    elif act.cls == "find":
        step["argv"] = ["find", ctx.workspace, "-name", act.arg]
    elif act.cls == "grep":
        step["argv"] = ["grep", "-rnE", act.arg, ctx.workspace]
    elif act.cls == "test":
        step["argv"] = [
            "srun",
            "-J",
            f"{JOB_PREFIX}-test",
            "-t",
            "1",
            "-n",
            "1",
            "-c",
            "1",
            "--mem",
            "64M",
            "python3",
            "-c",
            TEST_CODE,
        ]
    else:
        argv = _common(act, ctx, actor)
        if argv is None:
            raise ValueError(f"no command for class {act.cls!r}")
        step["argv"] = argv
    if tenantry_agent and "argv" in step:  # the fallback command hook runs beside the http one
        step["hook_if"] = fallback_runs(" ".join(step["argv"]))
    return step


def http_hook_for(actor: Actor, ctx: Context, url: str) -> dict[str, Any]:
    """Claude Code's http hook (``url``: the user's daemon); a step marked ``hook_if``
    also runs the command hook (its ``if`` fallback for the dangerous list)."""
    if not url or ctx.arm != "tenantry" or actor.kind != "agent":
        return {}
    return {"hook_url": url}


def hook_for(actor: Actor, ctx: Context) -> list[str] | None:
    """The agent's pre-tool command hook (tenantry arm, agents only), as ``tenantry
    install`` writes it into a user's own settings: the interpreter running Tenantry
    starts the hook script without ``site`` (``agents.products.common.hook_argv``)."""
    if ctx.arm == "tenantry" and actor.kind == "agent":
        return [ctx.tenantry[0], "-I", "-S", HOOK_ENTRY, "hook", "--agent", "claude-code"]
    return None
