"""The sbatch/srun/salloc option registry and the job shape it implies.

Every option Slurm 24/25 documents is listed with whether it takes a value
and its class. ``JobShape.build`` merges the three sources Slurm reads, in
its precedence order (``#SBATCH`` lines < ``SBATCH_*``/``SLURM_*`` variables <
command line), and computes what the job will really ask for: total GPUs
from ``--gpus``, ``--gpus-per-node`` x nodes, ``--gres=gpu:N`` x nodes,
``--gpus-per-task`` x tasks; partition lists; ``--time=0``/``UNLIMITED``.
Options the registry does not know, and variables it cannot map, are kept in
``unknown`` so the policy denies them rather than guess.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

# class names: shape (resources), identity (partition/account/qos/...),
# write/read/dir (paths), env (--export), wrap, jobref (acts inside another
# job), privileged (root/operator only), info (no job is created), plain.
_COMMON: tuple[tuple[str, str, str, str], ...] = (
    # (long, short, arg: y|n|o, class)
    ("account", "A", "y", "identity"),
    ("acctg-freq", "", "y", "plain"),
    ("array", "a", "y", "shape"),
    ("batch", "", "y", "plain"),
    ("bb", "", "y", "plain"),
    ("bbf", "", "y", "read"),
    ("begin", "b", "y", "plain"),
    ("chdir", "D", "y", "dir"),
    ("cluster-constraint", "", "y", "plain"),
    ("clusters", "M", "y", "identity"),
    ("comment", "", "y", "plain"),
    ("constraint", "C", "y", "plain"),
    ("container", "", "y", "plain"),
    ("container-id", "", "y", "plain"),
    ("contiguous", "", "n", "plain"),
    ("core-spec", "S", "y", "shape"),
    ("cores-per-socket", "", "y", "shape"),
    ("cpu-freq", "", "y", "plain"),
    ("cpus-per-gpu", "", "y", "shape"),
    ("cpus-per-task", "c", "y", "shape"),
    ("deadline", "", "y", "plain"),
    ("delay-boot", "", "y", "plain"),
    ("dependency", "d", "y", "plain"),
    ("distribution", "m", "y", "plain"),
    ("error", "e", "y", "write"),
    ("exclude", "x", "y", "plain"),
    ("exclusive", "", "o", "shape"),
    ("export", "", "y", "env"),
    ("export-file", "", "y", "read"),
    ("extra", "", "y", "plain"),
    ("extra-node-info", "B", "y", "shape"),
    ("get-user-env", "", "o", "plain"),
    ("gid", "", "y", "privileged"),
    ("gpu-bind", "", "y", "plain"),
    ("gpu-freq", "", "y", "plain"),
    ("gpus", "G", "y", "shape"),
    ("gpus-per-node", "", "y", "shape"),
    ("gpus-per-socket", "", "y", "shape"),
    ("gpus-per-task", "", "y", "shape"),
    ("gres", "", "y", "shape"),
    ("gres-flags", "", "y", "plain"),
    ("help", "h", "n", "info"),
    ("hint", "", "y", "plain"),
    ("hold", "H", "n", "plain"),
    ("ignore-pbs", "", "n", "plain"),
    ("input", "i", "y", "read"),
    ("job-name", "J", "y", "plain"),
    ("kill-on-invalid-dep", "", "y", "plain"),
    ("licenses", "L", "y", "plain"),
    ("mail-type", "", "y", "plain"),
    ("mail-user", "", "y", "plain"),
    ("mcs-label", "", "y", "plain"),
    ("mem", "", "y", "shape"),
    ("mem-bind", "", "y", "plain"),
    ("mem-per-cpu", "", "y", "shape"),
    ("mem-per-gpu", "", "y", "shape"),
    ("mincpus", "", "y", "shape"),
    ("network", "", "y", "plain"),
    ("nice", "", "o", "shape"),
    ("no-kill", "k", "o", "plain"),
    ("no-requeue", "", "n", "plain"),
    ("nodefile", "F", "y", "read"),
    ("nodelist", "w", "y", "plain"),
    ("nodes", "N", "y", "shape"),
    ("ntasks", "n", "y", "shape"),
    ("ntasks-per-core", "", "y", "shape"),
    ("ntasks-per-gpu", "", "y", "shape"),
    ("ntasks-per-node", "", "y", "shape"),
    ("ntasks-per-socket", "", "y", "shape"),
    ("oom-kill-step", "", "o", "plain"),
    ("open-mode", "", "y", "plain"),
    ("output", "o", "y", "write"),
    ("overcommit", "O", "n", "plain"),
    ("oversubscribe", "s", "n", "plain"),
    ("partition", "p", "y", "identity"),
    ("prefer", "", "y", "plain"),
    ("priority", "", "y", "privileged"),
    ("profile", "", "y", "plain"),
    ("propagate", "", "o", "plain"),
    ("qos", "q", "y", "identity"),
    ("quiet", "Q", "n", "plain"),
    ("reboot", "", "n", "privileged"),
    ("reservation", "", "y", "identity"),
    ("resv-ports", "", "o", "plain"),
    ("segment", "", "y", "plain"),
    ("signal", "", "y", "plain"),
    ("sockets-per-node", "", "y", "shape"),
    ("spread-job", "", "n", "plain"),
    ("switches", "", "y", "plain"),
    ("thread-spec", "", "y", "shape"),
    ("threads-per-core", "", "y", "shape"),
    ("time", "t", "y", "shape"),
    ("time-min", "", "y", "plain"),
    ("tmp", "", "y", "plain"),
    ("tres-bind", "", "y", "plain"),
    ("tres-per-task", "", "y", "shape"),
    ("uid", "", "y", "privileged"),
    ("usage", "", "n", "info"),
    ("use-min-nodes", "", "n", "plain"),
    ("verbose", "v", "n", "plain"),
    ("version", "V", "n", "info"),
    ("wait-all-nodes", "", "y", "plain"),
    ("wckey", "", "y", "identity"),
    ("x11", "", "o", "plain"),
)
_SBATCH_ONLY = (
    ("parsable", "", "n", "plain"),
    ("requeue", "", "n", "plain"),
    ("stepmgr", "", "n", "plain"),
    ("test-only", "", "n", "info"),
    ("wait", "W", "n", "plain"),
    ("wrap", "", "y", "wrap"),
)
_SRUN_ONLY = (
    ("accel-bind", "", "y", "plain"),
    ("bcast", "", "o", "plain"),
    ("bcast-exclude", "", "y", "plain"),
    ("compress", "", "o", "plain"),
    ("cpu-bind", "", "y", "plain"),
    ("disable-status", "X", "n", "plain"),
    ("epilog", "", "y", "read"),
    ("exact", "", "n", "plain"),
    ("external-launcher", "", "n", "plain"),
    ("het-group", "", "y", "plain"),
    ("immediate", "I", "o", "plain"),
    ("jobid", "", "y", "jobref"),
    ("kill-on-bad-exit", "K", "o", "plain"),
    ("label", "l", "n", "plain"),
    ("mpi", "", "y", "plain"),
    ("multi-prog", "", "n", "plain"),
    ("no-allocate", "Z", "n", "privileged"),
    ("overlap", "", "n", "plain"),
    ("preserve-env", "E", "n", "plain"),
    ("prolog", "", "y", "read"),
    ("pty", "", "o", "plain"),
    ("quit-on-interrupt", "q", "n", "plain"),
    ("relative", "r", "y", "plain"),
    ("send-libs", "", "o", "plain"),
    ("slurmd-debug", "", "y", "privileged"),
    ("task-epilog", "", "y", "read"),
    ("task-prolog", "", "y", "read"),
    ("test-only", "", "n", "info"),
    ("threads", "T", "y", "plain"),
    ("unbuffered", "u", "n", "plain"),
    ("wait", "W", "y", "plain"),
)
_SALLOC_ONLY = (
    ("bell", "", "n", "plain"),
    ("no-bell", "", "n", "plain"),
    ("no-shell", "", "n", "plain"),
    ("immediate", "I", "o", "plain"),
    ("wait", "W", "y", "plain"),
    ("test-only", "", "n", "info"),
)


@dataclass(frozen=True, slots=True)
class OptSpec:
    name: str
    arg: str  # y | n | o
    cls: str


def _table(
    *groups: tuple[tuple[str, str, str, str], ...],
) -> tuple[dict[str, OptSpec], dict[str, OptSpec]]:
    longs: dict[str, OptSpec] = {}
    shorts: dict[str, OptSpec] = {}
    for group in groups:
        for long, short, arg, cls in group:
            spec = OptSpec(long, arg, cls)
            longs[long] = spec
            if short:
                shorts[short] = spec
    return longs, shorts


REGISTRY: dict[str, tuple[dict[str, OptSpec], dict[str, OptSpec]]] = {
    "sbatch": _table(_COMMON, _SBATCH_ONLY),
    "srun": _table(
        tuple(o for o in _COMMON if o[0] not in ("array", "batch")),
        tuple(o for o in _SRUN_ONLY if o[0] != "quit-on-interrupt"),
    ),
    "salloc": _table(tuple(o for o in _COMMON if o[0] not in ("array",)), _SALLOC_ONLY),
}
# srun's -q is --qos in the common table; --quit-on-interrupt has no short form clash handled.

# Input environment variables -> option (Slurm's documented names).
_ENV_MAP = {
    "ACCOUNT": "account",
    "ACCTG_FREQ": "acctg-freq",
    "ARRAY_INX": "array",
    "BATCH": "batch",
    "CLUSTERS": "clusters",
    "CLUSTER_CONSTRAINT": "cluster-constraint",
    "CONSTRAINT": "constraint",
    "CONTAINER": "container",
    "CONTAINER_ID": "container-id",
    "CORE_SPEC": "core-spec",
    "CPUS_PER_GPU": "cpus-per-gpu",
    "CPUS_PER_TASK": "cpus-per-task",
    "DEBUG": "verbose",
    "DELAY_BOOT": "delay-boot",
    "DISTRIBUTION": "distribution",
    "EXCLUSIVE": "exclusive",
    "EXPORT": "export",
    "GET_USER_ENV": "get-user-env",
    "GPUS": "gpus",
    "GPUS_PER_NODE": "gpus-per-node",
    "GPUS_PER_TASK": "gpus-per-task",
    "GPU_BIND": "gpu-bind",
    "GPU_FREQ": "gpu-freq",
    "GRES": "gres",
    "GRES_FLAGS": "gres-flags",
    "HINT": "hint",
    "IGNORE_PBS": "ignore-pbs",
    "JOB_NAME": "job-name",
    "MEM_BIND": "mem-bind",
    "MEM_PER_CPU": "mem-per-cpu",
    "MEM_PER_GPU": "mem-per-gpu",
    "MEM_PER_NODE": "mem",
    "NETWORK": "network",
    "NO_KILL": "no-kill",
    "NO_REQUEUE": "no-requeue",
    "OPEN_MODE": "open-mode",
    "OVERCOMMIT": "overcommit",
    "PARTITION": "partition",
    "POWER": "plain",
    "PROFILE": "profile",
    "QOS": "qos",
    "REQUEUE": "requeue",
    "RESERVATION": "reservation",
    "SIGNAL": "signal",
    "SPREAD_JOB": "spread-job",
    "THREAD_SPEC": "thread-spec",
    "TIMELIMIT": "time",
    "TIME_MIN": "time-min",
    "TRES_BIND": "tres-bind",
    "TRES_PER_TASK": "tres-per-task",
    "USE_MIN_NODES": "use-min-nodes",
    "WAIT": "wait",
    "WAIT_ALL_NODES": "wait-all-nodes",
    "WCKEY": "wckey",
    "NTASKS": "ntasks",
    "NNODES": "nodes",
    "NODELIST": "nodelist",
    "EXCLUDE": "exclude",
    "OUTPUT": "output",
    "ERROR": "error",
    "INPUT": "input",
    "COMMENT": "comment",
    "STDOUTMODE": "open-mode",
    "UMASK": "plain",
    "CONF": "conf",
}
_ENV_PREFIX = {"sbatch": "SBATCH_", "salloc": "SALLOC_", "srun": "SLURM_"}
# SLURM_* variables that are job *outputs* or client settings, not srun inputs
_SLURM_OUTPUTS = re.compile(
    r"^SLURM_(JOB_|JOBID|STEP|PROCID|LOCALID|NODEID|TASK|CPUS_ON|SUBMIT|CLUSTER_NAME|"
    r"ARRAY_|GTIDS|PRIO|TOPOLOGY|LAUNCH|SRUN_COMM|NODENAME|TASKS_PER|MPI_TYPE|UMASK|"
    r"WORKING_CLUSTER|TIME_FORMAT|HINT|CPU_BIND|MEM_BIND|RESTART_COUNT|PTY|SCRIPT_CONTEXT|"
    r"EXPORT_ENV|HET_|SHARDS|LOCALID|DIST|CONTAINER)"
)


@dataclass(slots=True)
class ParsedArgv:
    opts: list[tuple[str, str]] = field(default_factory=list)  # (long name, value)
    positional: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)


def parse_argv(tool: str, argv: list[str]) -> ParsedArgv:
    """Split ``argv`` (without the program name) into known options and the rest.

    Stops at the first positional (the script for sbatch, the command for
    srun), as Slurm does.
    """
    longs, shorts = REGISTRY[tool]
    out = ParsedArgv()
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            out.positional = argv[i + 1 :]
            break
        if a.startswith("--"):
            name, eq, value = a[2:].partition("=")
            spec = longs.get(name) or _unique_prefix(name, longs)
            if spec is None:
                out.unknown.append(a)
                if not eq and i + 1 < len(argv) and not argv[i + 1].startswith("-"):
                    i += 1  # assume it took a value; it is denied anyway
            elif spec.arg == "y" and not eq:
                if i + 1 >= len(argv):
                    out.unknown.append(a)
                else:
                    out.opts.append((spec.name, argv[i + 1]))
                    i += 1
            else:
                out.opts.append((spec.name, value))
        elif a.startswith("-") and len(a) > 1:
            j = 1
            while j < len(a):
                spec = shorts.get(a[j])
                if spec is None:
                    out.unknown.append("-" + a[j])
                    break
                if spec.arg == "y":
                    rest = a[j + 1 :]
                    if rest:
                        out.opts.append((spec.name, rest.removeprefix("=")))
                    elif i + 1 < len(argv):
                        out.opts.append((spec.name, argv[i + 1]))
                        i += 1
                    else:
                        out.unknown.append(a)
                    break
                out.opts.append((spec.name, ""))
                j += 1
        elif a in (":", "hetjob"):
            # heterogeneous job components: not totalled here, so not allowed through
            out.unknown.append(f"{a} (heterogeneous job)")
            i += 1
            continue
        else:
            out.positional = argv[i:]
            break
        i += 1
    return out


def _unique_prefix(name: str, longs: dict[str, OptSpec]) -> OptSpec | None:
    """Slurm accepts unambiguous abbreviations of long options (getopt_long)."""
    if not name:
        return None
    hits = [s for n, s in longs.items() if n.startswith(name)]
    return hits[0] if len(hits) == 1 else None


def script_directives(text: str, tool: str = "sbatch") -> list[str]:
    """Options from ``#SBATCH`` lines, up to the first command (as sbatch reads them)."""
    del tool  # salloc/srun read no directives; kept for symmetry
    prefix = "#SBATCH"
    argv: list[str] = []
    for n, line in enumerate(text.splitlines()):
        s = line.strip()
        if n == 0 and s.startswith("#!"):
            continue
        if not s or (s.startswith("#") and not s.startswith(prefix)):
            continue
        if not s.startswith(prefix):
            break
        body = s[len(prefix) :]
        if body and not body[0].isspace():
            continue  # "#SBATCHX" is a comment
        try:
            words = shlex.split(body, comments=True)
        except ValueError:
            words = body.split()
        argv.extend(words)
    return argv


def burst_buffer_lines(text: str) -> list[str]:
    """``#BB``/``#DW`` directives (burst buffers: staging that runs with the job's rights)."""
    out: list[str] = []
    for n, line in enumerate(text.splitlines()):
        st = line.strip()
        if n == 0 and st.startswith("#!"):
            continue
        if st.startswith(("#BB ", "#DW ", "#BB\t", "#DW\t")):
            out.append(st[:200])
        elif st and not st.startswith("#"):
            break
    return out


def env_options(tool: str, env: dict[str, str]) -> tuple[list[tuple[str, str]], list[str]]:
    """Options implied by input variables (``SBATCH_*``, ``SLURM_*``), and unmapped ones."""
    prefix = _ENV_PREFIX[tool]
    opts: list[tuple[str, str]] = []
    unknown: list[str] = []
    for key, value in sorted(env.items()):
        if not key.startswith(prefix):
            continue
        if tool == "srun" and _SLURM_OUTPUTS.match(key):
            continue
        name = _ENV_MAP.get(key[len(prefix) :])
        if name is None or name == "conf":
            unknown.append(key)
        elif name != "plain":
            opts.append((name, value))
    return opts, unknown


_TIME = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")


def parse_time(value: str) -> int | None:
    """Seconds of a Slurm time spec; 0 for unlimited; None if unreadable."""
    v = value.strip().upper()
    if v in ("0", "UNLIMITED", "INFINITE", "-1"):
        return 0
    m = _TIME.match(v)
    if not m:
        return None
    days, a, b, c = m.groups()
    if days is not None:  # d-h, d-h:m, d-h:m:s
        h, mi, s = int(a), int(b or 0), int(c or 0)
        return int(days) * 86400 + h * 3600 + mi * 60 + s
    if c is not None:  # h:m:s
        return int(a) * 3600 + int(b) * 60 + int(c)
    if b is not None:  # m:s
        return int(a) * 60 + int(b)
    return int(a) * 60  # minutes


def parse_mem_mb(value: str) -> int | None:
    m = re.match(r"^(\d+(?:\.\d+)?)([KMGT]?)B?$", value.strip().upper())
    if not m:
        return None
    n = float(m.group(1))
    unit = m.group(2) or "M"
    return int(n * {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}[unit])


def _count(value: str) -> int | None:
    """An integer count, the max of a range ``a-b``, or None."""
    v = value.strip()
    if "-" in v:
        v = v.split("-")[-1]
    v = v.split(":")[-1]
    return int(v) if v.isdigit() else None


def _gpu_count(value: str, gres: bool = False) -> int | None:
    """GPUs in a ``--gpus``/``--gres``/``--tres-per-task`` value (``gpu:a100:2,nvme:1``)."""
    total = 0
    found = False
    for item in value.split(","):
        bits = item.strip().removeprefix("gres/").removeprefix("gres:").split(":")
        if not bits or not bits[0]:
            continue
        if bits[0] in ("gpu", "mps", "shard") or bits[0].startswith("gpu"):
            if bits[0] != "gpu" and not bits[0].startswith("gpu"):
                continue
            n = bits[-1] if len(bits) > 1 else "1"
            n = n.split("(")[0]
            if not n.isdigit():
                if len(bits) == 2:  # gpu:type -> one GPU
                    n = "1"
                else:
                    return None
            total += int(n)
            found = True
        elif bits[0].isdigit() and len(bits) == 1:  # --gpus=4
            total += int(bits[0])
            found = True
        elif not gres and len(bits) == 2 and bits[1].isdigit():
            total += int(bits[1])  # --gpus=a100:2
            found = True
    return total if found else 0


def _array_size(value: str) -> int | None:
    spec = value.split("%")[0]
    total = 0
    for part in spec.split(","):
        step = 1
        if ":" in part:
            part, s = part.split(":", 1)
            if not s.isdigit() or int(s) == 0:
                return None
            step = int(s)
        if "-" in part:
            a, b = part.split("-", 1)
            if not (a.isdigit() and b.isdigit()):
                return None
            total += max(0, (int(b) - int(a)) // step + 1)
        elif part.isdigit():
            total += 1
        else:
            return None
    return total


@dataclass(slots=True)
class JobShape:
    """What a submission asks for, after merging every source of options."""

    tool: str = "sbatch"
    partitions: list[str] = field(default_factory=list)
    account: str = ""
    qos: str = ""
    reservation: str = ""
    nodes: int = 1
    ntasks: int = 1
    cpus: int = 1
    gpus: int = 0
    mem_mb: int = 0
    time_s: int = -1  # -1: not given (partition default applies)
    unlimited_time: bool = False
    array_size: int = 1
    exclusive: bool = False
    nice_negative: bool = False
    info_only: bool = False
    options: set[str] = field(default_factory=set)
    unknown: list[str] = field(default_factory=list)
    privileged: list[str] = field(default_factory=list)
    bad_values: list[str] = field(default_factory=list)
    env_names: set[str] = field(default_factory=set)
    writes: list[str] = field(default_factory=list)
    reads: list[str] = field(default_factory=list)
    chdir: str = ""
    wrap: str = ""
    jobref: list[str] = field(default_factory=list)
    positional: list[str] = field(default_factory=list)
    cpus_per_task: int = 1
    values: dict[str, str] = field(default_factory=dict)  # final value of each option
    burst_buffer: list[str] = field(default_factory=list)  # #BB / #DW directive lines

    @classmethod
    def build(
        cls,
        tool: str,
        argv: list[str],
        script_text: str = "",
        env: dict[str, str] | None = None,
    ) -> JobShape:
        shape = cls(tool=tool)
        cli = parse_argv(tool, argv)
        shape.unknown.extend(cli.unknown)
        shape.positional = cli.positional
        merged: list[tuple[str, str]] = []
        if tool == "sbatch" and script_text:
            shape.burst_buffer = burst_buffer_lines(script_text)
            directives = parse_argv(tool, script_directives(script_text))
            shape.unknown.extend(directives.unknown)
            merged.extend(directives.opts)
        env_opts, env_unknown = env_options(tool, env or {})
        shape.unknown.extend(env_unknown)
        merged.extend(env_opts)
        merged.extend(cli.opts)
        shape._apply(merged)
        return shape

    def _apply(self, opts: list[tuple[str, str]]) -> None:
        longs, _ = REGISTRY[self.tool]
        last: dict[str, str] = {}
        for name, value in opts:
            spec = longs.get(name)
            if spec is None:
                self.unknown.append("--" + name)
                continue
            self.options.add(name)
            last[name] = value
            if spec.cls == "privileged":
                self.privileged.append("--" + name)
            elif spec.cls == "info":
                self.info_only = True
            elif spec.cls == "write":
                self.writes.append(value)
            elif spec.cls == "read":
                self.reads.append(value)
            elif spec.cls == "jobref":
                self.jobref.append(value)
            elif spec.cls == "env":
                for item in value.split(","):
                    key = item.split("=", 1)[0].strip()
                    if key and key.upper() not in ("ALL", "NONE", "NIL"):
                        self.env_names.add(key)
        self.values = dict(last)
        self.partitions = [p for p in last.get("partition", "").split(",") if p]
        self.account = last.get("account", "")
        self.qos = last.get("qos", "")
        self.reservation = last.get("reservation", "")
        self.chdir = last.get("chdir", "")
        self.wrap = last.get("wrap", "")
        self.exclusive = "exclusive" in last

        def num(name: str, default: int) -> int:
            if name not in last:
                return default
            n = _count(last[name])
            if n is None:
                self.bad_values.append(f"--{name}={last[name]}")
                return default
            return n

        self.nodes = max(1, num("nodes", 1))
        per_node = num("ntasks-per-node", 0)
        self.ntasks = max(1, num("ntasks", per_node * self.nodes if per_node else 1))
        cpt = max(1, num("cpus-per-task", 1))
        self.cpus_per_task = cpt
        self.cpus = max(self.ntasks * cpt, num("mincpus", 0) * self.nodes)
        gpus = 0
        if "gpus" in last:
            g = _gpu_count(last["gpus"])
            gpus = max(gpus, g if g is not None else 0)
            if g is None:
                self.bad_values.append(f"--gpus={last['gpus']}")
        for name, mult in (
            ("gpus-per-node", self.nodes),
            ("gres", self.nodes),
            ("gpus-per-task", self.ntasks),
            ("tres-per-task", self.ntasks),
            ("gpus-per-socket", self.nodes * max(1, num("sockets-per-node", 2))),
        ):
            if name in last:
                g = _gpu_count(last[name], gres=name in ("gres", "tres-per-task"))
                if g is None:
                    self.bad_values.append(f"--{name}={last[name]}")
                    continue
                gpus = max(gpus, g * mult)
        self.gpus = gpus
        for name in ("mem", "mem-per-cpu", "mem-per-gpu"):
            if name in last:
                mb = parse_mem_mb(last[name])
                if mb is None:
                    self.bad_values.append(f"--{name}={last[name]}")
                    continue
                per = {"mem": self.nodes, "mem-per-cpu": self.cpus, "mem-per-gpu": self.gpus}
                self.mem_mb = max(self.mem_mb, mb * max(1, per[name]))
                if mb == 0 and name == "mem":
                    self.exclusive = True  # --mem=0: all memory of each node
        if "time" in last:
            t = parse_time(last["time"])
            if t is None:
                self.bad_values.append(f"--time={last['time']}")
            else:
                self.time_s = t
                self.unlimited_time = t == 0
        if "array" in last:
            n = _array_size(last["array"])
            if n is None:
                self.bad_values.append(f"--array={last['array']}")
            else:
                self.array_size = max(1, n)
        if "nice" in last:
            v = last["nice"].strip()
            self.nice_negative = v.startswith("-")
