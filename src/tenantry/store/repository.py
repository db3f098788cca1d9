"""``Repository``: the base of a concept's store module (its tables, its SQL).

A repository is given the daemon's ``Store`` (shared: the repository migrates
its ``SCHEMA`` into it and never closes it) or a path (its own SQLite file,
opened and closed with it: tools and tests). Subclasses set ``SCHEMA`` and
write their SQL with ``?`` placeholders through ``self.db``.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from tenantry.store.engine import Schema, Store


class Repository:
    SCHEMA: ClassVar[Schema]

    def __init__(self, store: Store | str | Path) -> None:
        from tenantry.store.sqlite import SQLiteStore

        self._owned = isinstance(store, str | Path)
        self.db: Store = SQLiteStore(store) if isinstance(store, str | Path) else store

    async def start(self) -> None:
        if self._owned:
            await self.db.start()
        await self.db.migrate(self.SCHEMA)

    async def aclose(self) -> None:
        if self._owned:
            await self.db.aclose()
