"""Lesson vectors: a derived, append-only file beside the lesson store.

Each lesson's text (title, error signature, body) is embedded once with the
bundled static model (``embedding``) and appended to ``<store>.vectors`` as a
fixed-size record (store sequence number, lesson id, 256 half-precision
floats). The file is a cache of what the store holds: it is memory-mapped, so
opening it reads only the ids, and it is rebuilt from the store whenever it
is missing, belongs to another model, or ends in a torn record.

Retrieval uses it to re-rank the lexical candidates (see ``retrieval``): it
looks up the candidates' rows by id and compares them with the query's
vector, a few dozen dot products per query whatever the number of lessons.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from tenantry.memory.embedding import Embedder

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from tenantry.memory.store import LessonStore

_HEADER = 256  # bytes: a JSON line naming the model and dimension, space padded
_ID = 64  # bytes of a lesson id (generated ids are 11; curated names are longer)
BATCH = 512  # lessons embedded per sync step
RECHECK_S = 2.0  # a query looks for lessons written by other processes at most this often

K = TypeVar("K", int, str)


class VectorIndex:
    """The memory-mapped vectors of every lesson, looked up by lesson id."""

    def __init__(self, path: str | Path, embedder: Embedder) -> None:
        import numpy as np

        self.path = Path(path)
        self.embedder = embedder
        self._np = np
        self._dtype = np.dtype([("seq", "<i8"), ("id", f"S{_ID}"), ("vec", "<f2", (embedder.dim,))])
        self._header = json.dumps({"model": embedder.model, "dim": embedder.dim}).encode()
        self._rows: Any = None  # np.memmap of records, or None when empty
        self._row_of: dict[str, int] = {}
        self._row_of_seq: dict[int, int] = {}
        self.last_seq = 0
        self._opened = False
        self._checked_at = 0.0
        self._lock = asyncio.Lock()

    def __len__(self) -> int:
        return len(self._row_of)

    def open(self) -> None:
        """Map the file; start a new one if it is missing or not this model's."""
        np = self._np
        ok = False
        if self.path.is_file() and self.path.stat().st_size >= _HEADER:
            with self.path.open("rb") as f:
                ok = f.read(_HEADER).rstrip(b" \n") == self._header
        if not ok:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".tmp")
            tmp.write_bytes(self._header.ljust(_HEADER - 1) + b"\n")
            os.replace(tmp, self.path)
        size = self.path.stat().st_size
        whole = (size - _HEADER) // self._dtype.itemsize
        if _HEADER + whole * self._dtype.itemsize != size:  # a torn last record
            os.truncate(self.path, _HEADER + whole * self._dtype.itemsize)
        self._map(int(whole))
        self._opened = True
        if self._rows is not None and len(self._rows):
            self.last_seq = int(np.max(self._rows["seq"]))
            self._row_of = {
                bytes(x).decode(errors="replace"): i for i, x in enumerate(self._rows["id"])
            }
            self._row_of_seq = {int(x): i for i, x in enumerate(self._rows["seq"])}

    def _map(self, count: int) -> None:
        np = self._np
        self._rows = (
            np.memmap(self.path, dtype=self._dtype, mode="r", offset=_HEADER, shape=(count,))
            if count
            else None
        )

    async def sync(self, store: LessonStore, limit: int | None = None) -> int:
        """Embed the store's lessons not in the file yet (at most ``limit``); returns how many.

        Another sync already running makes this one return 0 at once: a query
        never waits for the bulk of a rebuild, it re-ranks with what is there.
        A bounded sync (a query's) asks the store only when this process wrote
        lessons since, or every ``RECHECK_S`` for lessons other processes wrote.
        """
        if self._lock.locked():
            return 0
        now = time.monotonic()
        if (
            limit is not None
            and self._opened
            and store.n_docs <= len(self)
            and now - self._checked_at < RECHECK_S
        ):
            return 0  # nothing written through this store since the last look
        self._checked_at = now
        added = 0
        async with self._lock:
            if not self._opened:
                await asyncio.to_thread(self.open)
            while limit is None or added < limit:
                step = BATCH if limit is None else min(BATCH, limit - added)
                rows = await store.texts_since(self.last_seq, step)
                if not rows:
                    break
                vecs = await asyncio.to_thread(
                    self.embedder.embed, [f"{t}. {s}. {b}" for _, _, t, s, b in rows]
                )
                self._append(rows, vecs)
                added += len(rows)
        return added

    def _append(self, rows: list[tuple[int, str, str, str, str]], vecs: npt.NDArray[Any]) -> None:
        np = self._np
        rec = np.zeros(len(rows), dtype=self._dtype)
        rec["seq"] = [r[0] for r in rows]
        rec["id"] = [r[1].encode()[:_ID] for r in rows]
        rec["vec"] = vecs.astype(np.float16)
        start = len(self._rows) if self._rows is not None else 0
        with self.path.open("ab") as f:
            f.write(rec.tobytes())
        self._map(start + len(rows))
        for i, r in enumerate(rows):
            self._row_of[r[1]] = start + i
            self._row_of_seq[r[0]] = start + i
        self.last_seq = max(self.last_seq, int(rec["seq"].max()))

    def similarities(self, query: npt.NDArray[np.float32], ids: list[str]) -> dict[str, float]:
        """Cosine of the query with each lesson of ``ids`` (by lesson id) that has a vector."""
        return self._sims(query, [(i, self._row_of[i]) for i in ids if i in self._row_of])

    def similarities_by_seq(
        self, query: npt.NDArray[np.float32], seqs: list[int]
    ) -> dict[int, float]:
        """The same, by store sequence number (the full-text index's rowid)."""
        return self._sims(query, [(s, self._row_of_seq[s]) for s in seqs if s in self._row_of_seq])

    def _sims(self, query: npt.NDArray[np.float32], have: list[tuple[K, int]]) -> dict[K, float]:
        np = self._np
        rows = self._rows
        if not have or rows is None:
            return {}
        vecs = np.asarray(rows["vec"][[r for _, r in have]], dtype=np.float32)
        sims = vecs @ query
        return {k: float(x) for (k, _), x in zip(have, sims, strict=True)}
