"""The MCP shim reads and writes pipes on its event loop; terminals and files keep anyio's.

The measured cost: anyio's thread-backed stdin/stdout took worker-thread hops for
every line read and every answer written and flushed (about 0.5 ms of the shim's
1.4 ms CPU per ``run_command``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import IO, Any

PROBE = """
import asyncio, sys
from tenantry.gateway.mcp_stdio import _stdio
i, o = asyncio.run(_stdio())
sys.stderr.write(f"KINDS {type(i).__name__} {type(o).__name__}\\n")
"""


def _kinds(stdin: int | IO[Any], stdout: int | IO[Any]) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COV_CORE_", "COVERAGE_"))}
    proc = subprocess.run(
        [sys.executable, "-c", PROBE],
        stdin=stdin,
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        timeout=120,
        check=True,
    )
    return next(x for x in proc.stderr.splitlines() if x.startswith("KINDS "))


def test_pipes_are_streamed_on_the_loop() -> None:
    assert _kinds(subprocess.PIPE, subprocess.PIPE) == "KINDS _PipeIn _PipeOut"


def test_a_file_or_terminal_keeps_threaded_files(tmp_path: Path) -> None:
    src = tmp_path / "in.txt"
    src.write_text("")
    with src.open() as fin:
        assert "_Pipe" not in _kinds(fin, subprocess.PIPE)
    with (tmp_path / "out.txt").open("w") as fout:
        assert "_Pipe" not in _kinds(subprocess.PIPE, fout)
