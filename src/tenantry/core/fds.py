"""File descriptors the daemon holds open itself (pipes, logs, lock files)."""

from __future__ import annotations

import contextlib
import os


def close_quietly(*fds: int | None) -> None:
    """Close each descriptor that is set; one already gone (``EBADF``, ``EIO``) is not an error."""
    for fd in fds:
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)
