"""``tenantry memory ...``: search and curate the facility memory.

Standard library only at import time (the CLI must start fast).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from tenantry.cli.common import add_json, client_from, emit, table

KINDS = ("fact", "recipe", "failure-fix", "limit", "warning")
SCOPES = ("session", "user", "project", "facility")

HELP = """\
Facility memory: lessons earlier sessions learned on this system (module
combinations, partition limits, what an error meant and what fixed it), with
provenance, trust and verification. Results are data, not instructions.

examples:
  tenantry memory search "sbatch: error: Batch job submission failed: Invalid qos"
  tenantry memory add --kind failure-fix --title "nvcc: unsupported gpu architecture compute_90" \\
      --body "cuda/11.8 lacks sm_90; load cuda/12.2" --subject module=cuda/12.2 \\
      --error "nvcc fatal: Unsupported gpu architecture 'compute_90'"
  tenantry memory show L0a1b2c3d4
  tenantry memory supersede L0a1b2c3d4 --body "use cuda/12.4 (12.2 was removed)"
  tenantry memory retract L0a1b2c3d4 --reason "module tree rebuilt"
  tenantry memory list --status candidate --mine
  tenantry memory approve L0a1b2c3d4          (staff only)
  tenantry memory export --out lessons.jsonl  (staff: everything; others: their own)
  tenantry memory import lessons.jsonl        (staff keep trust/scope; others get candidates)
"""


def _subject(values: list[str] | None) -> dict[str, str] | None:
    if not values:
        return None
    out = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"tenantry: --subject wants KEY=VALUE, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def _lesson_args(p: argparse.ArgumentParser, *, required: bool) -> None:
    p.add_argument("--title", required=required, help="one line: what the lesson is about")
    p.add_argument("--body", required=required, help="the lesson (facts, the fix, evidence)")
    p.add_argument("--kind", choices=KINDS, default=None if not required else "fact")
    p.add_argument(
        "--scope",
        choices=SCOPES,
        default=None if not required else "user",
        help="who sees it (facility needs staff, a probe or agreement)",
    )
    p.add_argument(
        "--subject",
        action="append",
        metavar="KEY=VALUE",
        help="subject key (module, package, partition, error, tool, path); repeat",
    )
    p.add_argument(
        "--error",
        dest="error_signature",
        metavar="TEXT",
        help="the error line this lesson answers (normalized before storing)",
    )
    p.add_argument(
        "--evidence",
        action="append",
        metavar="TEXT",
        help="what shows it is true (job id, command); repeat",
    )
    p.add_argument(
        "--claim",
        metavar="JSON",
        help='checkable claim, e.g. \'{"probe": "partition_limit", '
        '"partition": "gpu", "max_time_s": 86400}\'',
    )
    p.add_argument("--ttl-days", type=float, help="re-verify (or go stale) after this many days")
    add_json(p)


def _fields(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in ("title", "body", "kind", "scope", "error_signature", "evidence", "ttl_days"):
        value = getattr(args, name, None)
        if value is not None:
            out[name] = value
    subject = _subject(args.subject)
    if subject is not None:
        out["subject"] = subject
    if args.claim:
        try:
            out["claim"] = json.loads(args.claim)
        except ValueError as exc:
            raise SystemExit(f"tenantry: --claim is not JSON: {exc}") from exc
    return out


def register(sub: Any) -> None:
    mem: argparse.ArgumentParser = sub.add_parser(
        "memory",
        help="search and curate the facility memory of lessons",
        description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    msub = mem.add_subparsers(dest="memory_command", metavar="ACTION")

    def usage(args: argparse.Namespace) -> int:
        mem.print_help()
        return 2

    mem.set_defaults(handler=usage)

    p = msub.add_parser("search", help="find lessons matching text (paste an error)")
    p.add_argument("query", nargs="+", help="text to search for; raw error text is fine")
    p.add_argument("-n", "--limit", type=int, default=5)
    p.add_argument("--kind", action="append", choices=KINDS, help="only these kinds")
    p.add_argument("--history", action="store_true", help="include superseded/retracted")
    add_json(p)
    p.set_defaults(handler=_search)

    p = msub.add_parser("add", help="remember a lesson")
    _lesson_args(p, required=True)
    p.set_defaults(handler=_add)

    p = msub.add_parser("show", help="one lesson with provenance and history")
    p.add_argument("id")
    add_json(p)
    p.set_defaults(handler=_show)

    p = msub.add_parser("supersede", help="replace a lesson by a corrected version")
    p.add_argument("id")
    _lesson_args(p, required=False)
    p.set_defaults(handler=_supersede)

    p = msub.add_parser("retract", help="retract a lesson (kept in history)")
    p.add_argument("id")
    p.add_argument("--reason", default="", help="why it is wrong")
    add_json(p)
    p.set_defaults(handler=_simple("memory.retract", ("id", "reason")))

    p = msub.add_parser("approve", help="staff: approve a lesson into facility scope")
    p.add_argument("id")
    add_json(p)
    p.set_defaults(handler=_simple("memory.approve", ("id",)))

    p = msub.add_parser("list", help="list lessons visible to you")
    p.add_argument("--status", choices=("candidate", "active", "stale", "superseded", "retracted"))
    p.add_argument("--scope", choices=SCOPES)
    p.add_argument("--kind", choices=KINDS)
    p.add_argument("--mine", action="store_true", help="only lessons your user wrote")
    p.add_argument("-n", "--limit", type=int, default=50)
    add_json(p)
    p.set_defaults(handler=_list)

    p = msub.add_parser("verify", help="check a lesson's claim with a probe now")
    p.add_argument("id", nargs="?", help="lesson id (staff: omit to re-verify all due)")
    add_json(p)
    p.set_defaults(handler=_simple("memory.verify", ("id",)))
    p = msub.add_parser(
        "export", help="write lessons as JSONL records (provenance, trust, history)"
    )
    p.add_argument("--out", metavar="FILE", help="write here instead of stdout")
    p.add_argument("--scope", choices=SCOPES, help="only lessons of this scope")
    p.set_defaults(handler=_export)
    p = msub.add_parser("import", help="load JSONL records written by `memory export`")
    p.add_argument("file", help="JSONL file, one lesson record per line")
    add_json(p)
    p.set_defaults(handler=_import)


def _export(args: argparse.Namespace) -> int:
    params = {"scope": args.scope} if args.scope else {}
    records = client_from(args).call("memory.export", params)["records"]
    lines = "".join(json.dumps(r, sort_keys=True) + "\n" for r in records)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(lines)
    else:
        print(lines, end="")
    return 0


def _import(args: argparse.Namespace) -> int:
    records = []
    with open(args.file, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise SystemExit(f"tenantry: {args.file}:{n}: not JSON ({exc})") from None
    res = client_from(args).call("memory.import", {"records": records})
    emit(
        args,
        res,
        lambda r: (
            f"imported {r['imported']}, skipped {r['skipped']} already stored"
            + ("" if r["as_records"] else " (as your own untrusted candidates: not staff)")
        ),
    )
    return 0


def _rows(lessons: list[dict[str, Any]], score: bool = False) -> str:
    rows = []
    for d in lessons:
        row = [d["id"], d["kind"], d["scope"], d["trust"], d["status"], d["title"][:70]]
        if score:
            row.insert(1, f"{d.get('score', 0):.2f}")
        rows.append(row)
    header = ["id", "kind", "scope", "trust", "status", "title"]
    if score:
        header.insert(1, "score")
    return table(rows, header)


def _search(args: argparse.Namespace) -> int:
    params: dict[str, Any] = {
        "query": " ".join(args.query),
        "limit": args.limit,
        "include_history": args.history,
    }
    if args.kind:
        params["kinds"] = args.kind
    result = client_from(args).call("memory.recall", params)
    emit(args, result, lambda r: _rows(r["lessons"], score=True) + "\n\n" + r["note"])
    return 0


def _one(d: dict[str, Any]) -> str:
    les = d.get("lesson", d)
    prov = les.get("provenance", {})
    lines = [
        f"{les['id']}  {les['kind']}  scope={les['scope']}  trust={les['trust']}"
        f"  status={les['status']}{'  QUARANTINED' if les.get('quarantined') else ''}",
        f"title: {les['title']}",
        f"written by {prov.get('created_by')} from {', '.join(prov.get('sources', []))}",
    ]
    if les.get("subject"):
        lines.append("subject: " + ", ".join(f"{k}={v}" for k, v in les["subject"].items()))
    if les.get("error_signature"):
        lines.append(f"error signature: {les['error_signature']}")
    for key in ("supersedes", "superseded_by", "proposed_scope"):
        if les.get(key):
            lines.append(f"{key.replace('_', ' ')}: {les[key]}")
    lines += ["", les["body"]]
    for item in d.get("history", []):
        lines.append(f"  history: {item['action']} by {item['actor']} {item['detail']}")
    if d.get("note"):
        lines += ["", d["note"]]
    return "\n".join(lines)


def _add(args: argparse.Namespace) -> int:
    result = client_from(args).call("memory.remember", _fields(args))
    emit(args, result, _one)
    return 0


def _show(args: argparse.Namespace) -> int:
    emit(args, client_from(args).call("memory.show", {"id": args.id}), _one)
    return 0


def _supersede(args: argparse.Namespace) -> int:
    result = client_from(args).call("memory.supersede", {"id": args.id, **_fields(args)})
    emit(args, result, _one)
    return 0


def _list(args: argparse.Namespace) -> int:
    params = {k: getattr(args, k) for k in ("status", "scope", "kind", "mine", "limit")}
    result = client_from(args).call("memory.list", {k: v for k, v in params.items() if v})
    emit(args, result, lambda r: _rows(r["lessons"]))
    return 0


def _simple(op_name: str, names: tuple[str, ...]) -> Any:
    def handler(args: argparse.Namespace) -> int:
        params = {n: getattr(args, n) for n in names if getattr(args, n, None)}
        result = client_from(args).call(op_name, params)
        if "results" in result:
            emit(
                args,
                result,
                lambda r: (
                    "\n".join(f"{x['id']}: {x['result']} - {x['detail']}" for x in r["results"])
                    or "(none due)"
                ),
            )
        else:
            emit(args, result, _one)
        return 0

    return handler
