"""``tenantry shims install DIR``: PATH wrappers for squeue, sacct, sbatch, scancel, scontrol."""

from __future__ import annotations

import argparse
from typing import Any

from tenantry.cli.common import add_json, emit

EPILOG = """\
examples:
  tenantry shims install ~/.local/share/tenantry/shims
  export PATH=~/.local/share/tenantry/shims:$PATH     # in the agent's environment

In an agent context (CLAUDECODE, CODEX_THREAD_ID, ... set) `squeue`, `sacct`,
`sbatch`, `scancel` and `scontrol show job` are answered by the Tenantry daemon
in the real command's format; for people they run the real Slurm command.
"""


def register(sub: Any) -> None:
    p = sub.add_parser(
        "shims",
        help="install PATH shims for Slurm commands",
        description="Route agents' Slurm commands through Tenantry's shared status cache.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    verbs = p.add_subparsers(dest="shims_verb", metavar="VERB")
    inst = verbs.add_parser(
        "install",
        help="write the wrappers into DIR",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    inst.add_argument(
        "dir", help="directory to write squeue, sacct, sbatch, scancel, scontrol into"
    )
    inst.add_argument("--force", action="store_true", help="replace files that are not shims")
    add_json(inst)
    inst.set_defaults(handler=_install)
    p.set_defaults(handler=lambda args: (p.print_help(), 2)[1])


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
