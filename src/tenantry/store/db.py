"""The SQLite engine under its older name: ``Database`` is ``SQLiteStore``.

New code opens a store with ``tenantry.store.open_store(url)`` and types it as
``tenantry.store.engine.Store``; see ``store/engine.py`` for the seam.
"""

from __future__ import annotations

from tenantry.store.engine import load_migrations
from tenantry.store.sqlite import SQLiteStore, split_sql

Database = SQLiteStore

__all__ = ["Database", "load_migrations", "split_sql"]
