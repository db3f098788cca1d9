"""The workspace index: find, grep, ls, stat, du, tree and recent without the file system.

A parallel crawler fills one SQLite database (``<state>/index.sqlite3``) with a
path+stat table and a trigram index of text files, honouring ``.gitignore``;
inotify, a directory sweep and the gateway's command events keep it fresh.
See ``docs/index.md``.
"""

from tenantry.index.changes import ChangeSource, ManualSource, WatchdogSource
from tenantry.index.component import IndexService, create

__all__ = ["ChangeSource", "IndexService", "ManualSource", "WatchdogSource", "create"]
