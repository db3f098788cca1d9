"""The workspace index: find, grep, ls, stat, du, tree and recent without the file system.

A parallel crawler fills one SQLite database (``<state>/index.sqlite3``) with a
path+stat table and a trigram index of text files, honouring ``.gitignore``;
inotify, a directory sweep and the gateway's command events keep it fresh.
See ``docs/index.md``.

Names load lazily: ``tenantry find`` imports ``tenantry.index.cli`` (standard
library only) and must not pay for the daemon-side component.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False
if TYPE_CHECKING:
    from tenantry.index.changes import ChangeSource, ManualSource, WatchdogSource
    from tenantry.index.component import IndexService, create

__all__ = ["ChangeSource", "IndexService", "ManualSource", "WatchdogSource", "create"]
_WHERE = {
    "ChangeSource": "tenantry.index.changes",
    "ManualSource": "tenantry.index.changes",
    "WatchdogSource": "tenantry.index.changes",
    "IndexService": "tenantry.index.component",
    "create": "tenantry.index.component",
}


def __getattr__(name: str) -> object:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
