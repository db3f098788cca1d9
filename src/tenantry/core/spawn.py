"""``posix_spawn`` of a command: the cheap start the spawner and the lease pilot share.

A command starts in a session of its own (a cancel or timeout ends its whole
process group), in its directory, with /dev/null and its two pipes as its
descriptors 0, 1 and 2, an empty signal mask and the default disposition of
the signals the starting process ignores. Unlike ``subprocess.Popen`` there
is no Python work between the fork and the exec (the C library's vfork-like
clone runs the exec) and no descriptor walk: the caller keeps every other
descriptor close-on-exec (:func:`close_on_exec_all` does that once at start).

The directory is changed in the calling process, for the child to inherit,
and the C environment's ``PATH`` is the command's while it starts: only a
process none of whose other threads depends on either (the spawner, the
pilot) may call :func:`spawn`. Standard library only: the pilot runs on
compute nodes.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Mapping, Sequence


def ignored_signals() -> tuple[int, ...]:
    """The signals this process ignores (Python ignores SIGPIPE and SIGXFSZ; a
    parent may have ignored more), which a command must start at their default."""
    out = []
    for sig in signal.valid_signals():
        with contextlib.suppress(OSError, ValueError):
            if signal.getsignal(sig) in (signal.SIG_IGN, signal.default_int_handler):
                out.append(int(sig))
    return tuple(out)


def spawn(
    argv: Sequence[str],
    cwd: str,
    env: Mapping[str, str],
    *,
    stdin: int,
    stdout: int,
    stderr: int,
    default_signals: tuple[int, ...],
) -> int:
    """Start ``argv`` in ``cwd`` with ``env`` (see the module's docstring); its pid.

    The program is looked up on the command's own ``PATH``, as ``Popen`` and
    ``execvp`` do: by the C library, in the child, by ``execve`` on each
    directory in turn (the lookup by ``stat`` in Python cost more than the rest
    of the start). OSError when it cannot start: the directory (``filename``
    is ``cwd``), or the program: not found on that ``PATH`` (ENOENT), there but
    not executable (EACCES)."""
    os.chdir(cwd)
    # posix_spawnp searches the PATH of this process's C environment: the command's
    # for this start (os.environ, the mapping, is not touched)
    mine, theirs = os.environ.get("PATH"), env.get("PATH")
    if theirs != mine:
        _set_path(theirs)
    try:
        return os.posix_spawnp(
            argv[0],
            list(argv),
            env,
            file_actions=[
                (os.POSIX_SPAWN_DUP2, stdin, 0),
                (os.POSIX_SPAWN_DUP2, stdout, 1),
                (os.POSIX_SPAWN_DUP2, stderr, 2),
            ],
            setsid=True,
            setsigmask=(),
            setsigdef=default_signals,
        )
    finally:
        if theirs != mine:
            _set_path(mine)


def _set_path(path: str | None) -> None:
    if path is None:
        os.unsetenv("PATH")
    else:
        os.putenv("PATH", path)


def close_on_exec_all() -> None:
    """Mark every descriptor above 2 that this process inherited close-on-exec, so
    no command started by :func:`spawn` gets it (what ``Popen``'s ``close_fds``
    does at each start, done once)."""
    try:
        fds = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:  # no /proc: the descriptors below the soft limit
        fds = list(range(3, min(os.sysconf("SC_OPEN_MAX"), 65536)))
    for fd in fds:
        if fd > 2:
            with contextlib.suppress(OSError):
                os.set_inheritable(fd, False)
