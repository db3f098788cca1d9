"""``python slow_mcp.py SECONDS ARGV...``: run a stdio MCP server that lists its tools late.

Requests pass through to ``ARGV`` unchanged, except that ``tools/list`` is held
back ``SECONDS``: a server that answers ``initialize`` at once but is slow to
list its tools, as ``tenantry mcp`` is on a loaded login node. Replies go
straight from the server to the client (its stdout is inherited).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time


def _is_tools_list(line: bytes) -> bool:
    try:
        message = json.loads(line)
    except ValueError:
        return False
    return isinstance(message, dict) and message.get("method") == "tools/list"


def main(argv: list[str]) -> int:
    delay, command = float(argv[0]), argv[1:]
    server = subprocess.Popen(command, stdin=subprocess.PIPE)
    assert server.stdin is not None
    for line in sys.stdin.buffer:
        if _is_tools_list(line):
            time.sleep(delay)  # the injected slowness, not a wait for a condition
        server.stdin.write(line)
        server.stdin.flush()
    server.stdin.close()
    return server.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
