"""``tenantry run``'s command line read without argparse, for its plainly valid forms.

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
command line as before, with its help and its error messages. Standard library
only, and below the commands in the layers: ``cli.main`` hands the result to
``cli.core``'s ``run`` handler.
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


class RunArgs:
    """The parsed ``run`` command line: the attributes argparse's namespace would hold."""

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

    def fields(self) -> dict[str, object]:
        """Every parsed value by name, as ``vars()`` of argparse's namespace."""
        return {k: getattr(self, k) for k in self.__slots__}


def parse(argv: Sequence[str]) -> RunArgs | None:
    """The parsed ``run`` command line, or None when argparse should read it."""
    args = RunArgs()
    i, n = 0, len(argv)
    while i < n and argv[i] in GLOBAL:  # global options come before the command
        if i + 1 >= n or argv[i + 1].startswith("-"):
            return None
        setattr(args, GLOBAL[argv[i]], argv[i + 1])
        i += 2
    if i >= n or argv[i] != "run":
        return None
    i += 1
    while i < n:
        tok = argv[i]
        if tok == "--" or not tok.startswith("-"):
            break  # the command starts (argparse's REMAINDER keeps a leading "--")
        if tok in FLAGS:
            setattr(args, FLAGS[tok], True)
            i += 1
            continue
        spec = VALUES.get(tok)
        if spec is None or i + 1 >= n or argv[i + 1].startswith("-"):
            return None  # --help, an abbreviation, --opt=value, a missing value...
        name, convert = spec
        try:
            value = convert(argv[i + 1])
        except ValueError:
            return None
        if name == "where" and value not in WHERE:
            return None
        setattr(args, name, value)
        i += 2
    args.argv = list(argv[i:])
    if not args.argv[1 if args.argv[:1] == ["--"] else 0 :]:
        return None  # no command: argparse and the handler say so
    return args
