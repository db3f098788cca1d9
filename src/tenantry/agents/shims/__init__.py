"""PATH shims for ``squeue``, ``sacct``, ``sbatch``, ``scancel`` and ``scontrol show job``.

``tenantry shims install DIR`` writes one small wrapper per command into DIR;
put DIR first on an agent's ``PATH``. In an agent context the wrappers answer
from the daemon (status from the shared cache, submissions through policy,
dedup and attribution) in the real command's output format; in a human
context they exec the real binary untouched. See docs/slurm.md.

Modules: ``entry`` (the cheap agent-or-human switch every wrapper runs),
``run`` (the agent-side commands), ``formats`` (pure output formatters),
``install`` (writes the wrappers), ``cli`` (``tenantry shims``). Nothing is
imported here, so a wrapper loads only what it needs.
"""
