"""``tenantry run`` and ``submit`` command lines read without argparse, in their plain forms.

An agent starts ``tenantry run`` cold for every command, and argparse is the
largest part of that start: the module, ``gettext`` (which compiles a regular
expression at import and looks for message catalogs on every message),
``locale``, ``shutil`` (for the terminal width, with ``bz2`` and ``lzma``)
and the parser's construction. ``parse`` reads the forms an agent uses --

    [--socket S] [--state-dir D] run [--json] [--idempotent] [--cpus N] [--gpus N]
        [--mem M] [--time T] [--timeout SEC] [--where auto|local|lease] [--] CMD ARGS...

-- into the same values argparse gives (``tests/core/test_fastrun.py`` holds
the two side by side). Anything else (``--help``, an abbreviation, ``--opt=value``,
a value that does not convert, no command) returns None, and argparse reads the
command line as before, with its help and its error messages. ``parse_submit``
does the same for ``tenantry submit`` (the fallback of an agent's ``sbatch``):

    [--socket S] [--state-dir D] submit [--json] [--force] [-J|--job-name N]
        [-c|--cpus|--cpus-per-task N] [--mem M] [-G|--gpus N] [-t|--time T]
        [-p|--partition P] [-A|--account A] [-o|--output F] [-e|--error F]
        [-a|--array SPEC] SCRIPT [ARGS...]

Standard library only, and below the commands in the layers: ``cli.main``
hands the result to ``cli.core``'s ``run`` or ``submit`` handler.
"""

from __future__ import annotations

TYPE_CHECKING = False  # the client path avoids importing typing
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

GLOBAL = {"--socket": "socket", "--state-dir": "state_dir"}
FLAGS = {"--json": "json", "--idempotent": "idempotent"}
VALUES: dict[str, tuple[str, Callable[[str], object]]] = {
    "--cpus": ("cpus", int),
    "--gpus": ("gpus", int),
    "--mem": ("mem", str),
    "--time": ("time", str),
    "--timeout": ("timeout", float),
    "--where": ("where", str),
}
WHERE = ("auto", "local", "lease")


class Parsed:
    """A command line read here: the attributes argparse's namespace would hold."""

    __slots__: tuple[str, ...] = ()

    def fields(self) -> dict[str, object]:
        """Every parsed value by name, as ``vars()`` of argparse's namespace."""
        return {k: getattr(self, k) for k in self.__slots__}


class RunArgs(Parsed):
    """The parsed ``run`` command line."""

    __slots__ = (
        "argv",
        "cpus",
        "gpus",
        "idempotent",
        "json",
        "mem",
        "socket",
        "state_dir",
        "time",
        "timeout",
        "where",
    )

    def __init__(self) -> None:
        self.socket: str | None = None
        self.state_dir: str | None = None
        self.cpus: int | None = None
        self.gpus = 0
        self.mem: str | None = None
        self.time: str | None = None
        self.timeout: float | None = None
        self.where = "auto"
        self.idempotent = False
        self.json = False
        self.argv: list[str] = []


def parse(argv: Sequence[str]) -> RunArgs | None:
    """The parsed ``run`` command line, or None when argparse should read it."""
    args = RunArgs()
    i = _options(argv, "run", args, FLAGS, VALUES)
    if i is None or (args.where not in WHERE):
        return None
    args.argv = list(argv[i:])
    if not args.argv[1 if args.argv[:1] == ["--"] else 0 :]:
        return None  # no command: argparse and the handler say so
    return args


SUBMIT_FLAGS = {"--json": "json", "--force": "force"}
_SUBMIT_OPTIONS: tuple[tuple[tuple[str, ...], str, Callable[[str], object]], ...] = (
    (("-J", "--job-name"), "job_name", str),
    (("-c", "--cpus", "--cpus-per-task"), "cpus", int),
    (("--mem",), "mem", str),
    (("-G", "--gpus"), "gpus", int),
    (("-t", "--time"), "time", str),
    (("-p", "--partition"), "partition", str),
    (("-A", "--account"), "account", str),
    (("-o", "--output"), "output", str),
    (("-e", "--error"), "error", str),
    (("-a", "--array"), "array", str),
)
SUBMIT_VALUES = {o: (name, convert) for opts, name, convert in _SUBMIT_OPTIONS for o in opts}


class SubmitArgs(Parsed):
    """The parsed ``submit`` command line."""

    __slots__ = (
        "account",
        "args",
        "array",
        "cpus",
        "error",
        "force",
        "gpus",
        "job_name",
        "json",
        "mem",
        "output",
        "partition",
        "script",
        "socket",
        "state_dir",
        "time",
    )

    def __init__(self) -> None:
        self.socket: str | None = None
        self.state_dir: str | None = None
        self.job_name = ""
        self.cpus: int | None = None
        self.mem: str | None = None
        self.gpus = 0
        self.time: str | None = None
        self.partition: str | None = None
        self.account: str | None = None
        self.output = ""
        self.error = ""
        self.array = ""
        self.force = False
        self.json = False
        self.script = ""
        self.args: list[str] = []


def parse_submit(argv: Sequence[str]) -> SubmitArgs | None:
    """The parsed ``submit`` command line, or None when argparse should read it."""
    args = SubmitArgs()
    i = _options(argv, "submit", args, SUBMIT_FLAGS, SUBMIT_VALUES)
    if i is None or i >= len(argv) or argv[i].startswith("-") or "--" in argv[i:]:
        return None  # no script, or one argparse reads differently
    args.script, args.args = argv[i], list(argv[i + 1 :])
    return args


def _options(
    argv: Sequence[str],
    command: str,
    args: object,
    flags: dict[str, str],
    values: dict[str, tuple[str, Callable[[str], object]]],
) -> int | None:
    """Set ``args`` from the global options and ``command``'s; the index of the first
    word after them, or None when argparse should read the line."""
    i, n = 0, len(argv)
    while i < n and argv[i] in GLOBAL:  # global options come before the command
        if i + 1 >= n or argv[i + 1].startswith("-"):
            return None
        setattr(args, GLOBAL[argv[i]], argv[i + 1])
        i += 2
    if i >= n or argv[i] != command:
        return None
    i += 1
    while i < n:
        tok = argv[i]
        if tok == "--" or not tok.startswith("-"):
            break  # the command starts (argparse's REMAINDER keeps a leading "--")
        if tok in flags:
            setattr(args, flags[tok], True)
            i += 1
            continue
        spec = values.get(tok)
        if spec is None or i + 1 >= n or argv[i + 1].startswith("-"):
            return None  # --help, an abbreviation, --opt=value, a missing value...
        name, convert = spec
        try:
            setattr(args, name, convert(argv[i + 1]))
        except ValueError:
            return None
        i += 2
    return i
