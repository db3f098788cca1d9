"""argparse's parser for the ``tenantry`` command line, without its cold-start extras.

argparse makes a help formatter for every ``add_argument`` (to check the
metavar), and each one asks ``shutil`` for the terminal width; importing
``shutil`` pulls in ``fnmatch``, ``zlib``, ``bz2`` and ``lzma``, milliseconds
of a cold ``tenantry find``. ``Parser`` hands every parser (subcommands
included: argparse builds them with the parent's class) a formatter that
reads the width the way ``shutil.get_terminal_size`` does, once per process.
Help text is unchanged (``tests/core/test_fastrun.py`` compares it).
"""

from __future__ import annotations

import argparse
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_COLUMNS: list[int] = []
_LEAN: dict[type[argparse.HelpFormatter], type[argparse.HelpFormatter]] = {}


def columns() -> int:
    """The terminal width as ``shutil.get_terminal_size().columns`` gives it (fallback 80)."""
    if not _COLUMNS:
        try:
            width = int(os.environ["COLUMNS"])
        except (KeyError, ValueError):
            width = 0
        if width <= 0:
            try:
                width = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
            except (AttributeError, ValueError, OSError):
                width = 0
        _COLUMNS.append(width or 80)
    return _COLUMNS[0]


def lean(cls: type[argparse.HelpFormatter]) -> type[argparse.HelpFormatter]:
    """``cls`` with its default width given (as argparse computes it), not asked of shutil."""
    if cls not in _LEAN:

        class Lean(cls):  # type: ignore[valid-type,misc]
            def __init__(
                self,
                prog: str,
                indent_increment: int = 2,
                max_help_position: int = 24,
                width: int | None = None,
            ) -> None:
                if width is None:
                    width = columns() - 2  # argparse's own default: the terminal less 2
                super().__init__(prog, indent_increment, max_help_position, width)

        Lean.__name__ = Lean.__qualname__ = f"Lean{cls.__name__}"
        _LEAN[cls] = Lean
    return _LEAN[cls]


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` (keyword arguments only) whose formatters skip ``shutil``."""

    def __init__(
        self, *, formatter_class: type[argparse.HelpFormatter] = argparse.HelpFormatter, **kw: Any
    ) -> None:
        super().__init__(formatter_class=lean(formatter_class), **kw)
