"""``#SBATCH`` lines of a batch script, read as sbatch reads them (pure).

sbatch takes options from ``#SBATCH`` lines at the top of the script (before
the first command); options on the command line win. Tenantry applies the
resource-shaping ones itself so the local backend, dedup, policy and budgets
all see what the job will really ask for.
"""

from __future__ import annotations

import shlex
from typing import Any

from tenantry.errors import UsageError
from tenantry.units import parse_mem_mb, parse_time_s

# option -> (resources key or spec key, parser)
_OPTIONS: dict[str, tuple[str, Any]] = {
    "--time": ("resources.time_s", parse_time_s),
    "-t": ("resources.time_s", parse_time_s),
    "--cpus-per-task": ("resources.cpus", int),
    "-c": ("resources.cpus", int),
    "--mem": ("resources.mem_mb", parse_mem_mb),
    "--gpus": ("resources.gpus", int),
    "-G": ("resources.gpus", int),
    "--partition": ("resources.partition", str),
    "-p": ("resources.partition", str),
    "--account": ("resources.account", str),
    "-A": ("resources.account", str),
    "--job-name": ("name", str),
    "-J": ("name", str),
    "--output": ("output", str),
    "-o": ("output", str),
    "--error": ("error", str),
    "-e": ("error", str),
    "--array": ("array", str),
    "-a": ("array", str),
}


def directive_lines(script_text: str) -> list[str]:
    """The option text of each ``#SBATCH`` line before the first command."""
    out: list[str] = []
    for i, line in enumerate(script_text.splitlines()):
        s = line.strip()
        if i == 0 and s.startswith("#!"):
            continue
        if not s or (s.startswith("#") and not s.startswith("#SBATCH")):
            continue
        if not s.startswith("#SBATCH"):
            break  # sbatch stops at the first command
        out.append(s[len("#SBATCH") :].split(" #", 1)[0].strip())
    return out


def parse(script_text: str) -> dict[str, Any]:
    """Known options from ``#SBATCH`` lines as ``{"resources": {...}, "name": ...}``."""
    found: dict[str, Any] = {"resources": {}}
    for text in directive_lines(script_text):
        try:
            tokens = shlex.split(text)
        except ValueError as exc:
            raise UsageError(f"cannot read the #SBATCH line {text!r}: {exc}") from exc
        it = iter(tokens)
        for tok in it:
            opt, eq, value = tok.partition("=")
            if not eq and not opt.startswith("--") and len(opt) > 2 and opt[:2] in _OPTIONS:
                opt, value = opt[:2], opt[2:]  # -c4
            elif opt not in _OPTIONS:
                continue  # passed through to sbatch untouched
            elif not eq:
                value = next(it, "")
            key, conv = _OPTIONS[opt]
            try:
                parsed = conv(value)
            except ValueError as exc:
                raise UsageError(f"#SBATCH {opt} {value!r} is not valid") from exc
            if key.startswith("resources."):
                found["resources"][key.split(".", 1)[1]] = parsed
            else:
                found[key] = parsed
    return found


def apply(params: dict[str, Any]) -> dict[str, Any]:
    """Fill what the caller did not give from the script's ``#SBATCH`` lines."""
    found = parse(str(params.get("script_text", "")))
    out = dict(params)
    res = dict(out.get("resources") or {})
    for k, v in found.pop("resources").items():
        res.setdefault(k, v)
    out["resources"] = res
    for k, v in found.items():
        if not out.get(k):
            out[k] = v
    return out
