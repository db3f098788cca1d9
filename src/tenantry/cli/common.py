"""Shared pieces of the CLI: output in human or ``--json`` form, the client, errors.

Standard library only (the client path must start fast). Concept CLIs
(``tenantry/<concept>/cli.py``) define ``register(sub)`` and use these helpers.
"""

from __future__ import annotations

import sys

from tenantry.core import errors
from tenantry.core.settings import Settings, load

TYPE_CHECKING = False  # the CLI client path avoids importing typing (nor argparse: fastrun)

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable
    from typing import Any, TypeAlias

    from tenantry.cli.fastrun import RunArgs, SubmitArgs

    Handler = Callable[[argparse.Namespace], int]
    # a parsed command line: argparse's, or ``tenantry run``'s read without it
    Args: TypeAlias = argparse.Namespace | RunArgs | SubmitArgs


def add_json(p: argparse.ArgumentParser) -> None:
    if "--json" not in p._option_string_actions:
        p.add_argument("--json", action="store_true", help="print machine-readable JSON")


class _Declaring:
    def __init__(self, parser: argparse.ArgumentParser, json: bool) -> None:
        self.parser, self.json = parser, json

    def __enter__(self) -> argparse.ArgumentParser:
        return self.parser

    def __exit__(self, *exc: object) -> None:
        if self.json:
            add_json(self.parser)


def command(
    sub: Any,
    name: str,
    handler: Handler | None,
    help: str,
    *,
    json: bool = True,
    **kw: Any,
) -> _Declaring:
    """Declare one subcommand: ``with command(sub, "scan", _scan, "scan a file") as p:``
    then its arguments in the block; ``--json`` (unless ``json=False``) comes after them.
    An ``epilog`` (examples) is printed as written."""
    if "epilog" in kw:
        import argparse

        kw.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
    p: argparse.ArgumentParser = sub.add_parser(name, help=help, **kw)
    if handler is not None:
        p.set_defaults(handler=handler)
    return _Declaring(p, json)


def group(
    sub: Any, name: str, help: str, *, dest: str = "", **kw: Any
) -> tuple[argparse.ArgumentParser, Any]:
    """A command with verbs (``tenantry audit verify``): the parser and its subparsers
    (``dest`` default ``<name>_command``). Without a verb it prints its help (exit 2),
    unless a handler of its own is set."""
    if "epilog" in kw:
        import argparse

        kw.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
    metavar = kw.pop("metavar", "VERB")
    extra = {"required": kw.pop("required")} if "required" in kw else {}
    p: argparse.ArgumentParser = sub.add_parser(name, help=help, **kw)
    verbs = p.add_subparsers(dest=dest or f"{name}_command", metavar=metavar, **extra)
    p.set_defaults(handler=print_help_of(p))
    return p, verbs


def print_help_of(p: argparse.ArgumentParser) -> Handler:
    """A handler that prints ``p``'s help and exits 2 (a command given without its verb)."""

    def show(args: argparse.Namespace) -> int:
        p.print_help()
        return 2

    return show


def settings_from(args: Args, **flags: str) -> Settings:
    """The settings, with the global options and each of ``flags`` (setting name =
    the option's attribute in ``args``) that the command line gives."""
    return load(
        overrides={
            "state_dir": getattr(args, "state_dir", None),
            "socket": getattr(args, "socket", None),
            "backend": getattr(args, "backend", None),
            **{name: getattr(args, attr, None) for name, attr in flags.items()},
        }
    )


def _print_warnings(warnings: list[str]) -> None:
    for w in warnings:
        sys.stderr.write(f"tenantry: warning: {w}\n")


def client_from(args: Args, **kw: Any) -> Any:
    """A daemon client; warnings that come with results go to stderr."""
    from tenantry.client.sync import Client

    kw.setdefault("on_warnings", _print_warnings)
    return Client(settings_from(args), **kw)


def emit(args: Args, data: Any, human: Callable[[Any], str] | None = None) -> None:
    """Print ``data`` as JSON with ``--json``, else through ``human``."""
    if getattr(args, "json", False) or human is None:
        import json  # indented: the json package (a plain `tenantry run` needs none)

        json.dump(data, sys.stdout, indent=2, sort_keys=True, default=str)
        sys.stdout.write("\n")
    else:
        text = human(data)
        if text:
            sys.stdout.write(text if text.endswith("\n") else text + "\n")


def fail(args: Args, err: errors.TenantryError) -> int:
    """Render an error once: JSON envelope with ``--json``, else a message on stderr."""
    if getattr(args, "json", False):
        import json

        json.dump({"ok": False, "error": err.to_dict()}, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stderr.write(f"tenantry: {err.message}\n")
        if err.hint:
            sys.stderr.write(f"  hint: {err.hint}\n")
    return err.exit_code


def table(rows: list[list[str]], header: list[str]) -> str:
    """A plain aligned text table."""
    if not rows:
        return "(none)"
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=False)]
    lines = ["  ".join(str(h).ljust(w) for h, w in zip(header, widths, strict=False))]
    for r in rows:
        lines.append("  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=False)))
    return "\n".join(line.rstrip() for line in lines)


def job_rows(jobs: list[dict[str, Any]]) -> str:
    """Jobs as the table ``tenantry jobs`` prints (the hook answers ``squeue`` with it too)."""
    import time

    from tenantry.core.units import format_duration

    rows = []
    for j in jobs:
        elapsed = None
        if j.get("started_at"):
            elapsed = (j.get("ended_at") or time.time()) - j["started_at"]
        rows.append(
            [
                j["id"],
                j.get("backend_id", ""),
                j.get("name", "")[:24],
                j["state"],
                "" if j.get("exit_code") is None else str(j["exit_code"]),
                format_duration(elapsed),
                j.get("principal", ""),
                (j.get("reason") or "")[:40],
            ]
        )
    text = table(rows, ["JOBID", "BACKEND_ID", "NAME", "STATE", "EXIT", "ELAPSED", "BY", "REASON"])
    stale = [j for j in jobs if j.get("stale")]
    if stale:
        text += f"\n(status may be stale: {stale[0].get('stale_reason', '')})"
    return text
