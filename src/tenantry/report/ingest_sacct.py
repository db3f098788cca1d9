"""Read ``sacct --parsable2`` dumps (Open XDMoD's field set, or any set with a header).

The fast path is columnar: lines with exactly the expected number of ``|`` are
split by polars. The rest -- a field holding ``|`` (a ``--wrap`` pipeline in
``SubmitLine``) or a newline (a ``JobName``) -- go through :func:`repair`, a
pure function over the few odd lines: continuation lines are joined to the
record they belong to, and surplus separators are given to a free-text field
chosen so every typed field still validates. Lines that still do not fit are
returned as :class:`Unreadable` with their line number; nothing is dropped
silently. The file is read in blocks cut at record starts, so memory stays
bounded and a progress callback sees bytes as they are consumed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol

import polars as pl

from tenantry.errors import IngestError
from tenantry.report import slurm_fields as sf
from tenantry.report.schema import JOB_SCHEMA, Dataset, IngestStats, Unreadable, conform

# Open XDMoD's sacct field set, in its order (qos was added in later releases).
XDMOD_FIELDS = (
    "jobid",
    "jobidraw",
    "cluster",
    "partition",
    "qos",
    "account",
    "group",
    "gid",
    "user",
    "uid",
    "submit",
    "eligible",
    "start",
    "end",
    "elapsed",
    "exitcode",
    "state",
    "nnodes",
    "ncpus",
    "reqcpus",
    "reqmem",
    "reqtres",
    "alloctres",
    "timelimit",
    "nodelist",
    "jobname",
)
XDMOD_FIELDS_NO_QOS = tuple(f for f in XDMOD_FIELDS if f != "qos")

# Fields that may hold free text (and so a stray "|"), most likely first.
FREE_TEXT = ("submitline", "jobname", "comment", "workdir", "admincomment", "systemcomment")
_TS = r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d|Unknown|None|)$"
_INT = r"^\d*$"
_SUBMIT_RE = r"^(\S*/)?(sbatch|srun|salloc)\b"
# Typed fields and what they must look like (Python and polars/Rust regex alike).
VALID_RE: dict[str, str] = {
    "jobid": sf.JOB_ID_RE,
    "jobidraw": r"^\d+(\.[A-Za-z0-9_+\-]+)?$",
    "submit": _TS,
    "eligible": _TS,
    "start": _TS,
    "end": _TS,
    "elapsed": r"^((\d+-)?(\d+:)?\d+:\d+(\.\d+)?|INVALID|UNLIMITED|Partition_Limit|)$",
    "elapsedraw": _INT,
    "ncpus": _INT,
    "alloccpus": _INT,
    "nnodes": _INT,
    "reqcpus": _INT,
    "uid": _INT,
    "gid": _INT,
    "state": r"^([A-Z_]+( by \d+)?|)$",
}
VALIDATORS = {k: re.compile(v) for k, v in VALID_RE.items()}
_SUBMIT = re.compile(_SUBMIT_RE)
_RECORD_START = re.compile(r"^\d+(?:_(?:\d+|\[[^\]|]*\]))?(?:\+\d+)?(?:\.[A-Za-z0-9_+\-]+)?\|")
BLOCK = 32 << 20
# Raw fields the job table is built from (the rest are dropped block by block).
NEEDED = frozenset(
    [
        "jobid",
        "cluster",
        "user",
        "account",
        "partition",
        "jobname",
        "state",
        "submit",
        "start",
        "end",
        "elapsedraw",
        "elapsed",
        "alloccpus",
        "ncpus",
        "alloctres",
        "exitcode",
        "comment",
        "submitline",
        "environment",
        "envvars",
        "nodelist",
    ]
)

Progress = Callable[[int], None]


class _LineSource(Protocol):
    def __getitem__(self, i: int) -> str: ...


def looks_like(head: str) -> bool:
    """True when the first line of a file looks like a sacct parsable dump."""
    first = head.split("\n", 1)[0]
    return "|" in first and (
        first.lower().startswith("jobid") or _RECORD_START.match(first) is not None
    )


def layout_of(first_line: str, fields: list[str] | None = None) -> tuple[list[str], bool]:
    """(lower-case field names, has_header) for a dump whose first line is given."""
    cells = first_line.rstrip("\r").split("|")
    if cells and cells[0].strip().lower() == "jobid":
        return [c.strip().lower() for c in cells], True
    if fields:
        return [f.strip().lower() for f in fields], False
    n = len(cells)
    for candidate in (XDMOD_FIELDS, XDMOD_FIELDS_NO_QOS):
        if n == len(candidate):
            return list(candidate), False
    # A jobname holding "|" makes the line longer: XDMoD's layout still fits.
    if n > len(XDMOD_FIELDS):
        return list(XDMOD_FIELDS), False
    raise IngestError(
        f"cannot tell the sacct field layout: the first line has {n} fields and no header",
        hint="dump with a header line (no --noheader) or pass --fields a,b,c in sacct order",
    )


def _fits(cells: list[str], layout: list[str]) -> bool:
    return all(
        VALIDATORS[name].match(cell) is not None
        for name, cell in zip(layout, cells, strict=True)
        if name in VALIDATORS
    )


def _compositions(total: int, parts: int) -> Iterator[tuple[int, ...]]:
    """Every way to give ``total`` extra separators to ``parts`` fields."""
    if parts == 1:
        yield (total,)
        return
    for first in range(total, -1, -1):
        for rest in _compositions(total - first, parts - 1):
            yield (first, *rest)


def _soft_ok(cells: list[str], layout: list[str]) -> bool:
    for name, cell in zip(layout, cells, strict=True):
        if name == "submitline" and cell and not _SUBMIT.match(cell):
            return False
        if name == "workdir" and cell and not cell.startswith("/"):
            return False
    return True


def _merge(cells: list[str], layout: list[str], extras: dict[int, int]) -> list[str]:
    out: list[str] = []
    i = 0
    for p in range(len(layout)):
        take = 1 + extras.get(p, 0)
        out.append("|".join(cells[i : i + take]))
        i += take
    return out


def split_record(text: str, layout: list[str]) -> list[str] | None:
    """Split one logical record into ``len(layout)`` cells, or None if impossible.

    Surplus ``|`` are handed to the free-text fields. Every way of doing so is
    tried; a split must validate every typed field (timestamps, ids, numbers,
    states) and keep ``SubmitLine`` starting with a Slurm command and
    ``WorkDir`` with ``/``. Among the valid splits the one whose ``JobName``
    appears in its ``SubmitLine`` wins, then the one giving the most to the
    field most likely to hold a ``|`` (``SubmitLine``, then ``JobName``, ...).
    """
    cells = text.split("|")
    k = len(layout)
    if len(cells) == k:
        return cells if _fits(cells, layout) else None
    if len(cells) < k:
        return None
    extra = len(cells) - k
    free = [layout.index(n) for n in FREE_TEXT if n in layout]
    if not free:
        return None
    best: tuple[tuple[int, ...], list[str]] | None = None
    for n, combo in enumerate(_compositions(extra, len(free))):
        if n > 20000:
            break
        merged = _merge(cells, layout, dict(zip(free, combo, strict=True)))
        if not (_fits(merged, layout) and _soft_ok(merged, layout)):
            continue
        row = dict(zip(layout, merged, strict=True))
        named = int(
            bool(row.get("jobname")) and row.get("jobname", "") in row.get("submitline", "")
        )
        key = (named, *combo)
        if best is None or key > best[0]:
            best = (key, merged)
    return None if best is None else best[1]


def repair(
    lines: _LineSource, bad: list[int], good: set[int], layout: list[str], source: str, offset: int
) -> tuple[list[list[str]], set[int], list[Unreadable]]:
    """Rebuild records from odd lines.

    ``lines`` is a block, ``bad`` the sorted indexes of its odd non-empty lines,
    ``good`` the indexes that split cleanly. Returns the rebuilt records, the
    good indexes they absorbed (drop those rows) and what stays unreadable.
    """
    k = len(layout) - 1
    starts_with_id = layout[0] == "jobid"
    bad_set = set(bad)
    done: set[int] = set()
    records: list[list[str]] = []
    absorbed: set[int] = set()
    lost: list[Unreadable] = []

    def is_start(i: int) -> bool:
        return not starts_with_id or _RECORD_START.match(lines[i]) is not None

    def extend(i: int, text: str) -> tuple[str, int]:
        j = i
        while (
            text.count("|") < k
            and j + 1 in bad_set
            and j + 1 not in done
            and not (starts_with_id and _RECORD_START.match(lines[j + 1]))
        ):
            j += 1
            done.add(j)
            text = text + "\n" + lines[j]
        return text, j

    for i in bad:
        if i in done:
            continue
        done.add(i)
        first = i
        if is_start(i):
            text, _ = extend(i, lines[i])
        elif i - 1 in good and i - 1 not in absorbed:
            first = i - 1
            text, _ = extend(i, lines[i - 1] + "\n" + lines[i])
        else:
            text = lines[i]
        cells = split_record(text, layout)
        if cells is None:
            reason = "too few fields" if text.count("|") < k else "fields do not validate"
            lost.append(Unreadable(source, offset + first + 1, reason, text[:200]))
            continue
        if first != i:
            absorbed.add(first)
        records.append(cells)
    return records, absorbed, lost


def _blocks(path: Path, progress: Progress | None) -> Iterator[tuple[str, int]]:
    """Decoded text blocks cut before a record start, with their first line number."""
    line_no = 0
    carry = b""
    with path.open("rb") as fh:
        while True:
            chunk = fh.read(BLOCK)
            data = carry + chunk
            if not chunk:
                if data:
                    yield data.decode("utf-8", errors="replace"), line_no
                return
            cut = _cut(data)
            if cut <= 0:
                carry = data
                continue
            carry = data[cut:]
            text = data[:cut].decode("utf-8", errors="replace")
            yield text, line_no
            line_no += text.count("\n")
            if progress is not None:
                progress(len(chunk))


def _cut(data: bytes) -> int:
    """Offset after the last newline that is followed by a record start."""
    pos = len(data)
    while True:
        nl = data.rfind(b"\n", 0, pos)
        if nl < 0:
            return -1
        if re.match(rb"\d+[\d_\[\]+,\-.]*\|", data[nl + 1 : nl + 64]):
            return nl + 1
        pos = nl


def split_extra(lines: pl.DataFrame, layout: list[str]) -> pl.DataFrame:
    """Columnar repair of lines with surplus ``|`` (``i``, ``line``) -> ``i`` + layout columns.

    Each free-text field in turn (most likely first) gets all the surplus: the
    fields before it are split from the left, those after it from the right.
    A line is taken by the first field for which every typed field validates;
    lines no single field can take are left to :func:`repair`.
    """
    k1 = len(layout)
    free = [layout.index(n) for n in FREE_TEXT if n in layout]
    done: list[pl.DataFrame] = []
    rest = lines.select("i", "line")
    for p in free:
        if rest.is_empty():
            break
        head = pl.col("line").str.splitn("|", p + 1)
        tail = head.struct.field(f"field_{p}").str.reverse().str.splitn("|", k1 - p)
        cols = [head.struct.field(f"field_{j}").alias(layout[j]) for j in range(p)]
        cols.append(tail.struct.field(f"field_{k1 - p - 1}").str.reverse().alias(layout[p]))
        cols += [
            tail.struct.field(f"field_{k1 - p - 2 - j}").str.reverse().alias(layout[p + 1 + j])
            for j in range(k1 - p - 1)
        ]
        cand = rest.select("i", *cols)
        checks = [pl.col(c).str.contains(VALID_RE[c]) for c in layout if c in VALID_RE]
        if "submitline" in layout:
            checks.append(
                (pl.col("submitline") == "") | pl.col("submitline").str.contains(_SUBMIT_RE)
            )
        if "workdir" in layout:
            checks.append((pl.col("workdir") == "") | pl.col("workdir").str.starts_with("/"))
        ok = pl.all_horizontal(checks).fill_null(False) if checks else pl.lit(True)
        cand = cand.with_columns(_ok=ok)
        done.append(cand.filter(pl.col("_ok")).drop("_ok"))
        rest = rest.join(cand.filter(pl.col("_ok")).select("i"), on="i", how="anti")
    if not done:
        return pl.DataFrame(schema={"i": pl.UInt32, **dict.fromkeys(layout, pl.String)})
    return pl.concat(done, how="vertical")


def _parse_block(
    text: str, layout: list[str], source: str, offset: int
) -> tuple[pl.DataFrame, int, list[Unreadable]]:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    k = len(layout) - 1
    frame = (
        pl.DataFrame({"line": lines}, schema={"line": pl.String})
        .with_row_index("i")
        .with_columns(pl.col("line").str.strip_chars_end("\r"))
        .with_columns(
            n=pl.col("line").str.count_matches("|", literal=True),
            empty=pl.col("line").str.strip_chars() == "",
        )
    )
    odd = frame.filter((pl.col("n") != k) & ~pl.col("empty"))
    if odd.is_empty():
        split = frame.filter(~pl.col("empty")).select(pl.col("line").str.split_exact("|", k))
        split = split.unnest("line")
        split.columns = layout
        return split.select([c for c in layout if c in NEEDED]), 0, []
    extra = odd.filter(pl.col("n") > k)
    if layout[0] == "jobid":
        extra = extra.filter(pl.col("line").str.contains(_RECORD_START.pattern))
    resolved = split_extra(extra, layout)
    bad = odd.join(resolved.select("i"), on="i", how="anti")["i"].to_list()
    good_flags = (
        frame.select(
            ((pl.col("n") == k) & ~pl.col("empty")) | pl.col("i").is_in(resolved["i"].implode())
        )
        .to_series()
        .to_list()
    )
    good = {i - 1 for i in bad if i > 0 and good_flags[i - 1]}
    records: list[list[str]] = []
    absorbed: set[int] = set()
    lost: list[Unreadable] = []
    if bad:
        records, absorbed, lost = repair(_Lines(lines), bad, good, layout, source, offset)
    gone = pl.Series(sorted(absorbed), dtype=pl.UInt32).implode()
    split = (
        frame.filter((pl.col("n") == k) & ~pl.col("empty") & ~pl.col("i").is_in(gone))
        .select(pl.col("line").str.split_exact("|", k))
        .unnest("line")
    )
    split.columns = layout
    parts = [split, resolved.filter(~pl.col("i").is_in(gone)).drop("i")]
    if records:
        parts.append(pl.DataFrame(records, schema=dict.fromkeys(layout, pl.String), orient="row"))
    keep = [c for c in layout if c in NEEDED]
    raw = pl.concat([part.select(keep) for part in parts], how="vertical")
    return raw, len(resolved) + len(records), lost


class _Lines:
    """Lines of a block with a trailing carriage return removed on access."""

    def __init__(self, lines: list[str]) -> None:
        self._lines = lines

    def __getitem__(self, i: int) -> str:
        return self._lines[i].rstrip("\r")


def normalize(raw: pl.DataFrame, source: str, tz: str | None) -> tuple[pl.DataFrame, int]:
    """Raw sacct columns (lower-case names, strings) -> the job table; (jobs, steps skipped)."""
    cols = set(raw.columns)

    def col(name: str) -> pl.Expr:
        return pl.col(name) if name in cols else pl.lit(None, dtype=pl.String)

    steps = raw.select(sf.is_step("jobid").sum()).item() if "jobid" in cols else 0
    if "jobid" in cols:
        raw = raw.filter(~sf.is_step("jobid"))
    if "elapsedraw" in cols:
        elapsed = pl.col("elapsedraw").cast(pl.Int64, strict=False)
        if "elapsed" in cols:
            elapsed = pl.coalesce(elapsed, sf.elapsed_seconds("elapsed"))
    elif "elapsed" in cols:
        elapsed = sf.elapsed_seconds("elapsed")
    else:
        elapsed = pl.lit(0, dtype=pl.Int64)
    cpus_src = "alloccpus" if "alloccpus" in cols else "ncpus"
    cluster = col("cluster").fill_null("")
    out = raw.select(
        pl.lit(source).alias("source"),
        col("jobid").alias("job_id"),
        (cluster + ":" + sf.submission_base("jobid")).alias("submission_id"),
        col("user").alias("user"),
        col("account").alias("account"),
        col("partition").alias("partition"),
        col("jobname").alias("name"),
        sf.base_state("state").alias("state") if "state" in cols else col("state"),
        *(
            sf.timestamp(c, tz) if c in cols else pl.lit(None, dtype=pl.String).alias(c)
            for c in ("submit", "start", "end")
        ),
        elapsed.fill_null(0).alias("elapsed_s"),
        col(cpus_src).cast(pl.Int64, strict=False).fill_null(0).alias("cpus"),
        (sf.gpus_from_tres("alloctres") if "alloctres" in cols else pl.lit(0)).alias("gpus"),
        col("exitcode").alias("exit_code"),
        col("comment").alias("comment"),
        col("submitline").alias("submit_line"),
        pl.coalesce(col("environment"), col("envvars")).alias("env"),
        (
            (col("nodelist") == "None assigned")
            | (("alloctres" in cols) & (col("alloctres").fill_null("") == ""))
        )
        .fill_null(False)
        .alias("_no_alloc"),
    )
    # a job cancelled while pending gets Start = End = cancel time: it never started
    out = out.with_columns(
        start=pl.when((pl.col("elapsed_s") == 0) & pl.col("_no_alloc"))
        .then(None)
        .otherwise(pl.col("start"))
    )
    return conform(out, JOB_SCHEMA), int(steps)


def read_sacct(
    path: str | Path,
    *,
    tz: str | None = None,
    fields: list[str] | None = None,
    progress: Progress | None = None,
) -> Dataset:
    """Ingest one sacct parsable dump into a :class:`Dataset`."""
    p = Path(path)
    stats = IngestStats(source=str(p), kind="sacct")
    try:
        with p.open("r", encoding="utf-8", errors="replace") as fh:
            first = fh.readline()
    except OSError as exc:
        raise IngestError(f"cannot read {p}: {exc.strerror}") from exc
    if not first.strip():
        return Dataset(stats=[stats])
    layout, header = layout_of(first.rstrip("\n"), fields)
    frames = []
    for text, offset in _blocks(p, progress):
        body, start = text, offset
        if header and offset == 0:
            body = text.split("\n", 1)[1] if "\n" in text else ""
            start = 1
        raw, repaired, lost = _parse_block(body, layout, str(p), start)
        frames.append(raw)
        stats.repaired += repaired
        stats.unreadable.extend(lost)
    raw_all = pl.concat(frames, how="vertical") if frames else pl.DataFrame()
    if raw_all.is_empty():
        return Dataset(stats=[stats])
    jobs, steps = normalize(raw_all, p.name, tz)
    stats.records = jobs.height
    stats.skipped_steps = steps
    return Dataset(jobs=jobs, stats=[stats])
