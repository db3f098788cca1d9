"""Read ``sacct --parsable2`` dumps (Open XDMoD's field set, or any set with a header).

A header is recognised by its field names, in any order (``--format=ALL``
starts with ``Account``); it must include ``JobID``.

The fast path is columnar: lines with exactly the expected number of ``|`` are
split by polars. The rest -- a field holding ``|`` (a ``--wrap`` pipeline in
``SubmitLine``) or a newline (a ``JobName``) -- go through the columnar and
pure repairs of :mod:`tenantry.report.sacct_repair`. Lines that still do not
fit are returned as :class:`Unreadable` with their line number; nothing is dropped
silently. The file is read in blocks cut at record starts, so memory stays
bounded and a progress callback sees bytes as they are consumed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path

import polars as pl

from tenantry.core.errors import IngestError
from tenantry.report import slurm_fields as sf
from tenantry.report.files import Input, read_bytes
from tenantry.report.sacct_repair import RECORD_START, VALID_RE, repair, split_extra
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

# Every field name of `sacct --helpformat` in Slurm 22.05 (recorded) and the names 24.x added
# (sacct(1) of 24.05/24.11): a first line made of these is a header.
KNOWN_FIELDS = frozenset(
    """account admincomment alloccpus allocnodes alloctres associd avecpu avecpufreq avediskread
    avediskwrite avepages averss avevmsize blockid cluster comment constraints consumedenergy
    consumedenergyraw container cputime cputimeraw dbindex derivedexitcode elapsed elapsedraw
    eligible end exitcode flags gid group jobid jobidraw jobname layout maxdiskread
    maxdiskreadnode maxdiskreadtask maxdiskwrite maxdiskwritenode maxdiskwritetask maxpages
    maxpagesnode maxpagestask maxrss maxrssnode maxrsstask maxvmsize maxvmsizenode maxvmsizetask
    mcslabel mincpu mincpunode mincputask ncpus nnodes nodelist ntasks partition priority qos
    qosraw reason reqcpufreq reqcpufreqgov reqcpufreqmax reqcpufreqmin reqcpus reqmem reqnodes
    reqtres reservation reservationid reserved resvcpu resvcpuraw start state submit submitline
    suspended systemcomment systemcpu timelimit timelimitraw totalcpu tresusageinave
    tresusageinmax tresusageinmaxnode tresusageinmaxtask tresusageinmin tresusageinminnode
    tresusageinmintask tresusageintot tresusageoutave tresusageoutmax tresusageoutmaxnode
    tresusageoutmaxtask tresusageoutmin tresusageoutminnode tresusageoutmintask tresusageouttot
    uid user usercpu wckey wckeyid workdir extra failednode licenses planned plannedcpu
    plannedcpuraw qosreq stderr stdin stdout envvars environment""".split()  # noqa: SIM905
)
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
BLOCK = 32 << 20
# Typed fields checked on every cleanly split line (cheap, and they catch stray text).
SPOT_CHECK = ("jobid", "submit", "state")
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
        "admincomment",
    ]
)

Progress = Callable[[int], None]


# the name of the empty field after a ``--parsable`` line's last delimiter
TRAILING = "(trailing)"


def header_names(first_line: str) -> list[str] | None:
    """The lower-case field names when ``first_line`` is a sacct header, else None.

    Every cell must look like a field name and at least three quarters must be
    names sacct knows (so a newer Slurm's new fields do not stop the read).
    """
    cells = [c.strip() for c in first_line.rstrip("\r").split("|")]
    # ``sacct --parsable`` (-p) ends every line with the delimiter: one empty last cell
    trailing = len(cells) > 2 and cells[-1] == ""
    if trailing:
        cells.pop()
    if len(cells) < 2 or not all(_NAME.match(c) for c in cells):
        return None
    names = [c.lower() for c in cells]
    known = sum(n in KNOWN_FIELDS for n in names)
    if 4 * known < 3 * len(names):
        return None
    return [*names, TRAILING] if trailing else names


def looks_like(head: str) -> bool:
    """True when the first line of a file looks like a sacct parsable dump."""
    first = head.split("\n", 1)[0]
    return "|" in first and (
        header_names(first) is not None or RECORD_START.match(first) is not None
    )


def layout_of(first_line: str, fields: list[str] | None = None) -> tuple[list[str], bool]:
    """(lower-case field names, has_header) for a dump whose first line is given."""
    cells = first_line.rstrip("\r").split("|")
    names = header_names(first_line)
    if names is not None:
        if "jobid" not in names:
            raise IngestError(
                "the sacct header has no JobID field",
                hint="dump again with JobID in --format (or use --format=ALL)",
            )
        if len(set(names)) != len(names):
            raise IngestError(
                "the sacct header names a field twice", hint="list each field once in --format"
            )
        return names, True
    if fields:
        return [f.strip().lower() for f in fields], False
    n = len(cells)
    for candidate in (XDMOD_FIELDS, XDMOD_FIELDS_NO_QOS):
        if n == len(candidate):
            return list(candidate), False
        if n == len(candidate) + 1 and cells[-1] == "":  # --parsable: a delimiter at the end
            return [*candidate, TRAILING], False
    # A jobname holding "|" makes the line longer: XDMoD's layout still fits.
    if n > len(XDMOD_FIELDS):
        return list(XDMOD_FIELDS), False
    raise IngestError(
        f"cannot tell the sacct field layout: the first line has {n} fields and no header",
        hint="dump with a header line (no --noheader) or pass --fields a,b,c in sacct order",
    )


def _blocks(path: Path, layout: list[str], progress: Progress | None) -> Iterator[tuple[str, int]]:
    """Decoded text blocks cut before a record start, with their first line number."""
    line_no = 0
    carry = b""
    done = 0
    with Input(path) as fh:
        while True:
            chunk = fh.read(BLOCK)
            data = carry + chunk
            if not chunk:
                if data:
                    yield data.decode("utf-8", errors="replace"), line_no
                return
            cut = _cut(data, layout)
            if cut <= 0:
                carry = data
                continue
            carry = data[cut:]
            text = data[:cut].decode("utf-8", errors="replace")
            yield text, line_no
            line_no += text.count("\n")
            if progress is not None:
                now = fh.consumed()
                progress(now - done)
                done = now


_JOB_ID_B = re.compile(rb"\d+[\d_\[\]+,\-.A-Za-z]*")


def _cut(data: bytes, layout: list[str]) -> int:
    """Offset after the last newline followed by a line that is a whole record.

    A whole record line has one ``|`` per field boundary and a job id in the
    JobID column, or more ``|`` than that (a field holds one); a line continuing
    a record split by a newline has fewer. So the cut never splits a record.
    """
    k = len(layout) - 1
    j = layout.index("jobid") if "jobid" in layout else 0
    end = len(data)
    pos = end
    while True:
        nl = data.rfind(b"\n", 0, pos)
        if nl < 0:
            return -1
        nxt = data.find(b"\n", nl + 1, end)
        if nxt >= 0:  # the line after nl is complete
            line = data[nl + 1 : nxt]
            n = line.count(b"|")
            # a continuation line (after a newline inside a field) has fewer than k
            if n > k or (n == k and _JOB_ID_B.fullmatch(line.split(b"|", j + 1)[j])):
                return nl + 1
        pos = nl


def _parse_block(
    text: str, layout: list[str], source: str, offset: int
) -> tuple[pl.DataFrame, int, list[Unreadable]]:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    k = len(layout) - 1
    keep = [c for c in layout if c in NEEDED]
    frame = (
        pl.DataFrame({"line": lines}, schema={"line": pl.String})
        .with_row_index("i")
        .with_columns(pl.col("line").str.strip_chars_end("\r"))
        .with_columns(
            n=pl.col("line").str.count_matches("|", literal=True),
            empty=pl.col("line").str.strip_chars() == "",
        )
    )
    split = frame.filter((pl.col("n") == k) & ~pl.col("empty")).select(
        "i", pl.col("line").str.split_exact("|", k)
    )
    split = split.unnest("line")
    split.columns = ["i", *layout]
    # the right number of separators is not enough: the key typed fields must parse too
    checks = [pl.col(c).str.contains(VALID_RE[c]) for c in SPOT_CHECK if c in layout]
    if checks:
        ok = pl.all_horizontal(checks).fill_null(False)
        invalid = split.filter(~ok)["i"]
        split = split.filter(ok)
    else:
        invalid = pl.Series("i", [], dtype=pl.UInt32)
    odd = frame.filter(
        ((pl.col("n") != k) & ~pl.col("empty")) | pl.col("i").is_in(invalid.implode())
    )
    if odd.is_empty():
        return split.select(keep), 0, []
    extra = odd.filter(pl.col("n") > k)
    if layout[0] == "jobid":
        extra = extra.filter(pl.col("line").str.contains(RECORD_START.pattern))
    resolved = split_extra(extra, layout)
    bad = sorted(odd.join(resolved.select("i"), on="i", how="anti")["i"].to_list())
    # lines just before odd ones that split cleanly: a continuation may belong to them
    before = pl.Series([i - 1 for i in bad if i > 0], dtype=pl.UInt32).implode()
    good = set(split.filter(pl.col("i").is_in(before))["i"].to_list())
    good |= set(resolved.filter(pl.col("i").is_in(before))["i"].to_list())
    records: list[list[str]] = []
    absorbed: set[int] = set()
    lost: list[Unreadable] = []
    if bad:
        records, absorbed, lost = repair(_Lines(lines), bad, good, layout, source, offset)
    gone = pl.Series(sorted(absorbed), dtype=pl.UInt32).implode()
    parts = [
        split.filter(~pl.col("i").is_in(gone)).select(keep),
        resolved.filter(~pl.col("i").is_in(gone)).select(keep),
    ]
    if records:
        fixed = pl.DataFrame(records, schema=dict.fromkeys(layout, pl.String), orient="row")
        parts.append(fixed.select(keep))
    return pl.concat(parts, how="vertical"), len(resolved) + len(records), lost


class _Lines:
    """Lines of a block with a trailing carriage return removed on access."""

    def __init__(self, lines: list[str]) -> None:
        self._lines = lines

    def __getitem__(self, i: int) -> str:
        return self._lines[i].rstrip("\r")


def from_rows(rows: list[dict[str, str]], stats: IngestStats, tz: str | None, note: str) -> Dataset:
    """Records another reader made under sacct's field names -> its :class:`Dataset`, with
    ``note`` (what the format lacks) among the input's notes when it read any."""
    if not rows:
        return Dataset(stats=[stats])
    names = sorted({k for r in rows for k in r})
    raw = pl.DataFrame(
        [[r.get(k, "") for k in names] for r in rows],
        schema=dict.fromkeys(names, pl.String),
        orient="row",
    )
    jobs = normalize(raw, Path(stats.source).name, tz)[0]
    stats.records = jobs.height
    stats.notes.append(note)
    return Dataset(jobs=jobs, stats=[stats])


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
        col("cluster").alias("cluster"),
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
        col("admincomment").alias("admin_comment"),
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


# fields the report's figures rest on (any of each group's spellings)
_WANTED = {
    "User": ("user", "uid"),
    "Submit": ("submit",),
    "Start": ("start",),
    "End": ("end", "elapsed", "elapsedraw"),
    "AllocCPUS": ("alloccpus", "ncpus", "alloctres"),
}


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
    head = read_bytes(p, 1 << 20).decode("utf-8", errors="replace")
    first = head.split("\n", 1)[0]
    if not first.strip():
        return Dataset(stats=[stats])
    layout, header = layout_of(first.rstrip("\n"), fields)
    missing = [name for name in _WANTED if not any(f in layout for f in _WANTED[name])]
    if missing:
        stats.notes.append(
            f"the dump has no {', '.join(missing)} field: those columns of the report are"
            " empty or counted as one unknown user; dump with --format=ALL or add them"
        )
    frames = []
    for text, offset in _blocks(p, layout, progress):
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
