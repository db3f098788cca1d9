"""PATH shims for ``squeue``, ``sacct``, ``sbatch``, ``scancel`` and ``scontrol show job``.

``tenantry shims install DIR`` writes one small wrapper per command into DIR;
put DIR first on an agent's ``PATH``. In an agent context the wrappers answer
from the daemon (status from the shared cache, submissions through policy,
dedup and attribution) in the real command's output format; in a human
context they exec the real binary untouched. See docs/slurm.md.
"""

from tenantry.shims.install import install
from tenantry.shims.run import NAMES, main

__all__ = ["NAMES", "install", "main"]
