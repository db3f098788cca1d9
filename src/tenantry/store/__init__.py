"""State store: one seam (``engine.Store``), two engines (SQLite, PostgreSQL).

Open one with ``open_store(url)``; each concept reaches it through its own
repository module and declares its tables as a ``Schema``.
"""

from tenantry.store.engine import Conn, Migration, Row, Schema, Store, load_migrations
from tenantry.store.url import engine_of, mask_url, open_store

__all__ = [
    "Conn",
    "Migration",
    "Row",
    "Schema",
    "Store",
    "engine_of",
    "load_migrations",
    "mask_url",
    "open_store",
]
