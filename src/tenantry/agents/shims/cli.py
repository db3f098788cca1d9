"""``tenantry shims install DIR``: PATH wrappers for squeue, sacct, sbatch, scancel, scontrol."""

from __future__ import annotations

import argparse
from typing import Any

from tenantry.cli.common import command, emit, group

EPILOG = """\
examples:
  tenantry shims install ~/.local/share/tenantry/shims
  export PATH=~/.local/share/tenantry/shims:$PATH     # in the agent's environment

In an agent context (CLAUDECODE, CODEX_THREAD_ID, ... set) `squeue`, `sacct`,
`sbatch`, `scancel` and `scontrol show job` are answered by the Tenantry daemon
in the real command's format; for people they run the real Slurm command.
"""


HELP = "install PATH shims for Slurm commands"


def register(sub: Any) -> None:
    about = "Route agents' Slurm commands through Tenantry's shared status cache."
    _, verbs = group(sub, "shims", HELP, dest="shims_verb", description=about, epilog=EPILOG)
    with command(verbs, "install", _install, "write the wrappers into DIR", epilog=EPILOG) as inst:
        inst.add_argument(
            "dir", help="directory to write squeue, sacct, sbatch, scancel, scontrol into"
        )
        inst.add_argument("--force", action="store_true", help="replace files that are not shims")


def _install(args: argparse.Namespace) -> int:
    from tenantry.agents.shims.install import install

    paths = install(args.dir, force=args.force)
    emit(
        args,
        {"dir": args.dir, "shims": paths},
        lambda d: (
            "\n".join(d["shims"]) + f"\n\nadd to the agent's PATH:  export PATH={d['dir']}:$PATH"
        ),
    )
    return 0
