"""Sandboxed agent sessions: ``tenantry agent``, their profile and their sockets.

- ``profile``: what a session sees, may write and inherits (declared once);
- ``bwrap``: finding a usable bubblewrap;
- ``registry``: the daemon's sessions, their sockets and PID namespaces;
- ``launcher``: the client side of ``tenantry agent``.
"""

__all__: list[str] = []
