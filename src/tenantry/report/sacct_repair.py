"""Repair of sacct ``--parsable2`` lines that do not split cleanly.

``--parsable2`` does not escape its separator, so ``SubmitLine``, ``JobName``,
``Comment`` and ``WorkDir`` may hold ``|`` and newlines. Two repairs, both
validated against the typed fields (ids, timestamps, numbers, states), with
``SubmitLine`` required to start with a Slurm command and ``WorkDir`` with ``/``:

- :func:`split_extra` (columnar, for the common case): one free-text field
  takes all surplus separators; each field is tried in turn.
- :func:`split_record` and :func:`repair` (pure Python, for the rest):
  continuation lines are joined to their record and the surplus may be spread
  over several free-text fields; the most plausible valid split wins.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Protocol

import polars as pl

from tenantry.report import slurm_fields as sf
from tenantry.report.schema import Unreadable

# Fields that may hold free text (and so a stray "|"), most likely first.
FREE_TEXT = (
    "submitline",
    "jobname",
    "comment",
    "constraints",
    "workdir",
    "admincomment",
    "systemcomment",
    "container",
)
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
RECORD_START = re.compile(r"^\d+(?:_(?:\d+|\[[^\]|]*\]))?(?:\+\d+)?(?:\.[A-Za-z0-9_+\-]+)?\|")


class LineSource(Protocol):
    def __getitem__(self, i: int) -> str: ...


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
        line = row.get("submitline", "")
        named = sum(
            bool(row.get(f)) and row.get(f, "") in line
            for f in ("jobname", "comment", "constraints")
        )
        clean = -sum(
            row[layout[p]].startswith("|") or row[layout[p]].endswith("|")
            for p, n in zip(free, combo, strict=True)
            if n
        )
        key = (clean, named, *combo)
        if best is None or key > best[0]:
            best = (key, merged)
    return None if best is None else best[1]


def repair(
    lines: LineSource, bad: list[int], good: set[int], layout: list[str], source: str, offset: int
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
        return not starts_with_id or RECORD_START.match(lines[i]) is not None

    def extend(i: int, text: str) -> tuple[str, int]:
        j = i
        while (
            text.count("|") < k
            and j + 1 in bad_set
            and j + 1 not in done
            and not (starts_with_id and RECORD_START.match(lines[j + 1]))
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
        elif i - 1 in good and i - 1 not in absorbed and lines[i].count("|") < k:
            # a line that could be a record of its own is not a continuation
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
        # the field taking the surplus must not start or end with it (an empty neighbour
        # field is likelier than a value beginning with "|": Comment "" + Constraints "a|b")
        edge = pl.col(layout[p]).str.starts_with("|") | pl.col(layout[p]).str.ends_with("|")
        checks.append(~edge)
        ok = pl.all_horizontal(checks).fill_null(False)
        cand = cand.with_columns(_ok=ok)
        done.append(cand.filter(pl.col("_ok")).drop("_ok"))
        rest = rest.join(cand.filter(pl.col("_ok")).select("i"), on="i", how="anti")
    if not done:
        return pl.DataFrame(schema={"i": pl.UInt32, **dict.fromkeys(layout, pl.String)})
    return pl.concat(done, how="vertical")
