"""Write the shim wrappers into a directory (``tenantry shims install DIR``)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import tenantry
from tenantry.agents.shims.entry import MARKER, NAMES
from tenantry.core import errors

_TEMPLATE = """#!{python} -IS
# {marker} {name} (written by `tenantry shims install`; agents -> Tenantry, humans -> real {name})
import sys
sys.path.insert(0, {src!r})
from tenantry.agents.shims.entry import main
sys.exit(main({name!r}, sys.argv[1:], shim_dir={shim_dir!r}))
"""


def wrapper(name: str, shim_dir: str, python: str | None = None) -> str:
    """The text of one wrapper script."""
    src = str(Path(tenantry.__file__).resolve().parents[1])
    return _TEMPLATE.format(
        python=python or sys.executable, marker=MARKER, name=name, src=src, shim_dir=shim_dir
    )


def install(directory: str | os.PathLike[str], *, force: bool = False) -> list[str]:
    """Write every wrapper into ``directory``; returns their paths.

    An existing file that is not a Tenantry shim is never overwritten unless
    ``force`` is set (it could be the real ``squeue``).
    """
    d = Path(directory).expanduser().resolve()
    d.mkdir(parents=True, exist_ok=True)
    written = []
    for name in NAMES:
        path = d / name
        if path.exists() and not force:
            head = path.read_bytes()[:400]
            if MARKER.encode() not in head:
                raise errors.Conflict(
                    f"{path} exists and is not a Tenantry shim",
                    hint="choose an empty directory, or pass --force to replace it",
                )
        tmp = path.with_name(f".{name}.tmp")
        tmp.write_text(wrapper(name, str(d)))
        tmp.chmod(0o755)
        tmp.replace(path)
        written.append(str(path))
    return written
