"""Open input files, decompressing gzip transparently (PWA ships ``.swf.gz``).

:class:`Input` reads decompressed bytes and reports progress in *file* bytes,
so a progress bar sized by the file's length ends at 100 % for both plain and
compressed inputs.
"""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path
from types import TracebackType
from typing import BinaryIO

from tenantry.core.errors import IngestError

GZIP_MAGIC = b"\x1f\x8b"


def is_gzip(path: Path) -> bool:
    with path.open("rb") as fh:
        return fh.read(2) == GZIP_MAGIC


class Input:
    """A readable input; ``consumed()`` is how far into the file on disk it has read."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            self._raw: BinaryIO = self.path.open("rb")
        except OSError as exc:
            raise IngestError(f"cannot read {self.path}: {exc.strerror}") from exc
        self._gz = self._raw.read(2) == GZIP_MAGIC
        self._raw.seek(0)
        self._stream: BinaryIO = (
            gzip.GzipFile(fileobj=self._raw, mode="rb") if self._gz else self._raw  # type: ignore[assignment]
        )

    def read(self, n: int = -1) -> bytes:
        try:
            return self._stream.read(n)
        except (OSError, EOFError, zlib.error) as exc:
            raise IngestError(f"{self.path}: corrupt compressed input: {exc}") from exc

    def consumed(self) -> int:
        return self._raw.tell()

    def close(self) -> None:
        if self._gz:
            self._stream.close()
        self._raw.close()

    def __enter__(self) -> Input:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def read_bytes(path: str | Path, limit: int = -1) -> bytes:
    with Input(path) as f:
        return f.read(limit)


def read_text(path: str | Path) -> str:
    return read_bytes(path).decode("utf-8", errors="replace")
