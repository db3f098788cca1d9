"""One job request: every source of sbatch options merged once, as Slurm merges them.

A submission reaches Tenantry as the submit API's fields (``resources``,
``name``, ``output``, ``array``, ``extra``...), the shims' argv (turned into
those fields), the script's ``#SBATCH`` lines and the ``SBATCH_*`` variables
of the client's environment. Slurm reads them with the precedence
``#SBATCH`` < ``SBATCH_*`` < command line, with its own units (``--mem`` in
MB, ``--mem=0`` for all of each node's memory, bare ``--time`` in minutes)
and GPU spellings (``--gpus``, ``--gpus-per-node`` x nodes, ``--gres=gpu:N``
x nodes, ``--gpus-per-task`` x tasks). :class:`JobRequest` does that merge
once (through :class:`tenantry.safety.policy.slurmopts.JobShape`, the option
registry), and policy, budget pricing, dedup and submission all read it.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Any

from tenantry.core.errors import UsageError
from tenantry.safety.policy.slurmopts import JobShape, parse_argv

# API fields that become command-line options, and the sbatch option each is
SBATCH_ENV_PREFIX = "SBATCH_"


def api_argv(params: dict[str, Any]) -> list[str]:
    """sbatch command-line options equivalent to a ``jobs.submit`` request's fields.

    The Slurm backend writes the same options (``resources.gpus`` as
    ``--gres=gpu:N``, per node; ``time_s`` rounded up to minutes), then
    ``extra`` verbatim, then the script and its arguments.
    """
    out: list[str] = []
    res = params.get("resources") or {}
    if not isinstance(res, dict):
        raise UsageError("resources must be an object (cpus, mem_mb, gpus, time_s, ...)")
    try:
        if res.get("cpus"):
            out.append(f"--cpus-per-task={int(res['cpus'])}")
        if res.get("mem_mb"):
            out.append(f"--mem={int(res['mem_mb'])}M")
        if res.get("gpus"):
            out.append(f"--gres=gpu:{int(res['gpus'])}")
        if res.get("time_s") is not None:
            t = int(res["time_s"])
            out.append("--time=0" if t <= 0 else f"--time={(t + 59) // 60}")
    except (TypeError, ValueError) as exc:
        raise UsageError("resources must be numbers (cpus, mem_mb, gpus, time_s)") from exc
    if res.get("partition"):
        out.append(f"--partition={res['partition']}")
    if res.get("account"):
        out.append(f"--account={res['account']}")
    for key, opt in (("array", "array"), ("output", "output"), ("error", "error")):
        if params.get(key):
            out.append(f"--{opt}={params[key]}")
    if params.get("name"):
        out.append(f"--job-name={params['name']}")
    out.extend(str(x) for x in params.get("extra") or ())
    script = str(params.get("script") or "")
    if script:
        out.append(script)
    out.extend(str(a) for a in params.get("args") or ())
    return out


def sbatch_env(params: dict[str, Any]) -> dict[str, str]:
    """The ``SBATCH_*`` variables of the client's environment (sbatch reads them)."""
    env = params.get("env") or {}
    if not isinstance(env, dict):
        return {}
    return {str(k): str(v) for k, v in env.items() if str(k).startswith(SBATCH_ENV_PREFIX)}


@dataclass(frozen=True, slots=True)
class JobRequest:
    """The canonical request: what the job will really ask Slurm for."""

    params: dict[str, Any]
    shape: JobShape
    cwd: str

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> JobRequest:
        text = params.get("script_text")
        shape = JobShape.build(
            "sbatch", api_argv(params), text if isinstance(text, str) else "", sbatch_env(params)
        )
        return cls(dict(params), shape, str(params.get("cwd") or "/"))

    # --- what it asks for ---------------------------------------------------------

    @property
    def tasks(self) -> int:
        """Array tasks (each one a job for budgets)."""
        return max(1, self.shape.array_size)

    def hours(self, default_hours: float) -> float:
        t = self.shape.time_s
        return t / 3600.0 if t > 0 else default_hours

    def amounts(self, default_hours: float = 1.0) -> dict[str, float]:
        """What the submission charges: jobs, core-hours and GPU-hours asked, every task."""
        hours = self.hours(default_hours)
        return {
            "jobs": float(self.tasks),
            "core_hours": self.tasks * max(self.shape.cpus, 1) * hours,
            "gpu_hours": self.tasks * self.shape.gpus * hours,
        }

    def path(self, raw: str) -> str:
        """An output/error path as Slurm resolves it: relative to ``--chdir``, else the cwd."""
        base = self.shape.chdir or self.cwd
        if base and not base.startswith("/"):
            base = posixpath.join(self.cwd, base)
        return posixpath.normpath(raw if raw.startswith("/") else posixpath.join(base, raw))

    # --- what submission sends ----------------------------------------------------

    def checked(self) -> JobRequest:
        """This request, or a UsageError naming the values sbatch could not read either."""
        if self.shape.bad_values:
            bad = ", ".join(sorted(set(self.shape.bad_values)))
            raise UsageError(
                f"cannot read {bad}",
                hint="use Slurm's formats: --time=HH:MM:SS or minutes, --mem=8G, --gres=gpu:2",
            )
        return self

    def spec_params(self) -> dict[str, Any]:
        """The request's params with the fields the script or environment set filled in.

        The backend writes the fields as command-line options, which win over
        ``#SBATCH`` lines, so a field is filled only with the value Slurm
        would have taken anyway, and only where the translation is exact:
        ``--mem=0`` (all of each node) is left to sbatch, and GPUs only from
        a plain ``--gpus N`` on one node.
        """
        out = dict(self.params)
        given = dict(out.get("resources") or {})
        res = dict(given)
        # options passed through in ``extra`` reach sbatch verbatim: not doubled here
        passed = {n for n, _ in parse_argv("sbatch", [str(x) for x in out.get("extra") or ()]).opts}
        v = {k: val for k, val in self.shape.values.items() if k not in passed}
        s = self.shape
        if "time_s" not in given and s.time_s > 0:
            res["time_s"] = s.time_s
        if "cpus" not in given and "cpus-per-task" in v:
            res["cpus"] = s.cpus_per_task
        if "mem_mb" not in given and "mem" in v and s.mem_mb > 0:
            res["mem_mb"] = max(1, s.mem_mb // max(1, s.nodes))
        if "gpus" not in given and "gpus" in v and s.nodes == 1 and v["gpus"].isdigit():
            res["gpus"] = s.gpus
        if "partition" not in given and s.partitions:
            res["partition"] = ",".join(s.partitions)
        if "account" not in given and s.account:
            res["account"] = s.account
        out["resources"] = res
        for key, opt in (("name", "job-name"), ("output", "output"), ("error", "error")):
            if not out.get(key) and v.get(opt):
                out[key] = v[opt]
        if not out.get("array") and v.get("array"):
            out["array"] = v["array"]
        if v.get("chdir"):
            # the backend writes --chdir from cwd; it must be the directory Slurm would use
            out["cwd"] = self.path(".")
        return out
