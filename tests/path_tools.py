"""Programs on a PATH of a test's own: a command must be looked up on its PATH."""

from __future__ import annotations

from pathlib import Path


def path_tools(root: Path) -> dict[str, str]:
    """``root/bin`` with ``tnt-only-here`` (prints ``found`` and its directory) and
    ``plain`` (there but not executable); the environment whose PATH has it first."""
    bin_dir = root / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "tnt-only-here"
    tool.write_text("#!/bin/sh\necho found\npwd\n")
    tool.chmod(0o755)
    (bin_dir / "plain").write_text("not a program\n")
    return {"PATH": f"{bin_dir}:/usr/bin:/bin"}
