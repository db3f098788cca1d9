"""The environment a batch job gets: an allow-list of the caller's variables.

A client sends its whole environment with a submission, and that often holds
secrets (API keys, tokens). A job is journaled so it survives a crash, so only
what a job needs to run the way it would from the caller's shell is kept, and
only that is ever written to disk:

- the login basics: ``PATH``, ``HOME``, ``USER``, ``LOGNAME``, ``SHELL``,
  ``TERM``, ``TZ``, ``TMPDIR``, ``LANG``, ``LANGUAGE``, ``LC_*``;
- the software environment the caller activated: ``VIRTUAL_ENV``,
  ``CONDA_*``, ``PYTHONPATH``, ``LD_LIBRARY_PATH``, ``LIBRARY_PATH``,
  ``CPATH``, ``PKG_CONFIG_PATH``, ``MANPATH``, environment modules
  (``MODULEPATH``, ``MODULESHOME``, ``LOADEDMODULES``, ``_LMFILES_``, ``LMOD_*``),
  ``SPACK_*``;
- threading knobs: ``OMP_*``, ``MKL_*``, ``OPENBLAS_*``;
- Tenantry's own ``TENANTRY_*`` (no secrets: identity comes from the socket).

Anything else (``*_TOKEN``, ``*_KEY``, cloud credentials...) is dropped; put
what a job needs in its script. Slurm jobs additionally get the daemon's own
environment, as sbatch gives any job.
"""

from __future__ import annotations

from collections.abc import Mapping

# what a login session sets for any program
LOGIN = ("PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM")
NAMES = frozenset(
    {
        *LOGIN,
        "TZ",
        "TMPDIR",
        "LANG",
        "LANGUAGE",
        "VIRTUAL_ENV",
        "PYTHONPATH",
        "LD_LIBRARY_PATH",
        "LIBRARY_PATH",
        "CPATH",
        "PKG_CONFIG_PATH",
        "MANPATH",
        "MODULEPATH",
        "MODULESHOME",
        "LOADEDMODULES",
        "_LMFILES_",
    }
)
PREFIXES = ("LC_", "CONDA_", "LMOD_", "SPACK_", "OMP_", "MKL_", "OPENBLAS_", "TENANTRY_")
# never kept even under an allowed prefix
_SECRET_WORDS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "API_KEY", "PRIVATE")


def allowed(name: str) -> bool:
    if any(w in name.upper() for w in _SECRET_WORDS):
        return False
    return name in NAMES or name.startswith(PREFIXES)


def job_environment(env: Mapping[str, str]) -> dict[str, str]:
    """The variables of ``env`` a job keeps (see the module docstring)."""
    return {k: v for k, v in env.items() if allowed(k)}
