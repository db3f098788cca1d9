"""A plain ``sbatch`` command line as the ``jobs.submit`` request it means, or None.

The daemon's hook submits an agent's ``sbatch [OPTIONS] SCRIPT [ARGS]`` itself
(``agents.hook``) when this module can read it exactly: the options go through
the one sbatch option registry (``safety.policy.slurmopts``), and only those
whose meaning Tenantry's submission keeps are read:

- ``-J``, ``-o``, ``-e`` and ``-a`` become the request's name, output, error
  and array (the fields Tenantry records and reads logs from); ``-p``, ``-A``
  and ``-c`` its partition, account and CPUs per task;
- ``--time``, ``--mem``, ``--mem-per-cpu``, ``-n``, ``-N``,
  ``--ntasks-per-node``, ``-G``, ``--gpus-per-node``, ``--gres``, ``-C`` and
  ``-q`` reach sbatch verbatim (``extra``; the request model reads them with
  Slurm's units for policy and budgets);
- ``--parsable`` changes only what the answer prints.

Without ``-o`` the output is sbatch's own default, ``slurm-%j.out`` (an
array's ``slurm-%A_%a.out``), in the directory of the command. Anything else
is None and the hook's redirect to ``tenantry submit`` stands: an option not
listed, ``--wrap``, ``--chdir``, a script on stdin, a shell construct
(pipes, redirections, substitutions, variables, globs, ``~``), a relative directory, a script that
is not a regular file of at most ``SCRIPT_MAX`` bytes starting with ``#!``.
"""

from __future__ import annotations

import os

from tenantry.agents import steer
from tenantry.client.wire import ENV_DIGEST, ENV_LATEST

FIELDS = {"job-name": "name", "output": "output", "error": "error", "array": "array"}
RESOURCES = frozenset({"partition", "account"})
VERBATIM = frozenset(
    {
        "time",
        "mem",
        "mem-per-cpu",
        "ntasks",
        "nodes",
        "ntasks-per-node",
        "gpus",
        "gpus-per-node",
        "gres",
        "constraint",
        "qos",
    }
)
SCRIPT_MAX = 1 << 20
_GLOB = set("*?[{~")


class SbatchLine:
    """What the hook submits (``params`` for ``jobs.submit``) and how sbatch would print it."""

    __slots__ = ("params", "parsable")

    def __init__(self, params: dict[str, object], parsable: bool) -> None:
        self.params, self.parsable = params, parsable

    def printed(self, backend_id: str) -> str:
        """sbatch's own output line for the job it submitted."""
        return backend_id if self.parsable else f"Submitted batch job {backend_id}"


def read(command: str, cwd: str) -> SbatchLine | None:
    """The submission ``command`` (run in ``cwd``) means, when it can be read exactly."""
    argv = steer.plain_argv(command)
    if not argv or argv[0].rsplit("/", 1)[-1] != "sbatch" or not os.path.isabs(cwd):
        return None
    if _GLOB & set(command):
        return None  # the shell would expand these: sbatch's answer depends on it
    from tenantry.safety.policy.slurmopts import parse_argv

    parsed = parse_argv("sbatch", argv[1:])
    if parsed.unknown or not parsed.positional:
        return None
    params: dict[str, object] = {}
    resources: dict[str, object] = {}
    extra: list[str] = []
    parsable = False
    for name, value in parsed.opts:
        if name == "parsable":
            parsable = True
        elif name in FIELDS and value:
            params[FIELDS[name]] = value
        elif name in RESOURCES and value:
            resources[name] = value
        elif name == "cpus-per-task" and value.isdigit() and int(value) > 0:
            resources["cpus"] = int(value)
        elif name in VERBATIM and value:
            extra.append(f"--{name}={value}")
        else:
            return None
    script, *args = parsed.positional
    path = os.path.normpath(os.path.join(cwd, script))
    text = _script_text(path)
    if text is None:
        return None
    if not params.get("output"):
        params["output"] = "slurm-%A_%a.out" if params.get("array") else "slurm-%j.out"
    params.update(
        script=path,
        script_text=text,
        args=args,
        cwd=cwd,
        resources=resources,
        extra=extra,
        **{ENV_DIGEST: ENV_LATEST},
    )
    return SbatchLine(params, parsable)


def _script_text(path: str) -> str | None:
    """The batch script's text, or None where sbatch's own answer is needed."""
    import stat

    try:
        # never blocks: a FIFO or a device is not opened (and O_NONBLOCK for a swap after)
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        with open(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as fh:
            info = os.fstat(fh.fileno())
            if not stat.S_ISREG(info.st_mode) or info.st_size > SCRIPT_MAX:
                return None
            raw = fh.read(SCRIPT_MAX + 1)
    except OSError:
        return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text if text.startswith("#!") and len(raw) <= SCRIPT_MAX else None
