"""Core commands: run, submit, status, jobs, wait, cancel, sessions, events, serve, mcp."""

from __future__ import annotations

import argparse
from typing import Any


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser("version", help="print the version")
    p.set_defaults(handler=_version)


def _version(args: argparse.Namespace) -> int:
    from tenantry import __version__

    print(__version__)
    return 0
