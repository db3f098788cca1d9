"""Tell what each input is and load them all into one :class:`Dataset`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from tenantry.errors import IngestError
from tenantry.report import ingest_json, ingest_sacct, ingest_swf, ingest_telemetry
from tenantry.report.files import read_bytes
from tenantry.report.schema import Dataset

KINDS = ("auto", "sacct", "json", "swf", "telemetry")
Progress = Callable[[int], None]


def sniff(path: Path) -> str:
    """The kind of an input file from its first bytes."""
    head = read_bytes(path, 65536)
    if ingest_telemetry.looks_like(head):
        return "telemetry"
    text = head.decode("utf-8", errors="replace")
    if text.lstrip().startswith("{"):
        return "json"
    if ingest_sacct.looks_like(text):
        return "sacct"
    if ingest_swf.looks_like(text):
        return "swf"
    raise IngestError(
        f"{path}: not a format the report reads",
        hint="give a sacct --parsable2 dump, sacct --json output, an SWF trace or a Tenantry "
        "store (tenantry.db); force one with --input-format",
    )


def load(
    paths: Sequence[str | Path],
    *,
    kind: str = "auto",
    tz: str | None = None,
    fields: list[str] | None = None,
    progress: Progress | None = None,
) -> Dataset:
    data = Dataset()
    for raw in paths:
        p = Path(raw)
        if not p.is_file():
            raise IngestError(f"{p}: no such file")
        k = sniff(p) if kind == "auto" else kind
        if k == "sacct":
            part = ingest_sacct.read_sacct(p, tz=tz, fields=fields, progress=progress)
        elif k == "json":
            part = ingest_json.read_json(p)
        elif k == "swf":
            part = ingest_swf.read_swf(p, tz=tz)
        elif k == "telemetry":
            part = ingest_telemetry.read_telemetry(p)
        else:
            raise IngestError(f"unknown input format {k!r}", hint=f"one of {', '.join(KINDS)}")
        if k != "sacct" and progress is not None:
            progress(p.stat().st_size)
        data.extend(part)
    return data
