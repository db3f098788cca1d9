"""Command-running options of ordinary tools are judged as the commands they run."""

from __future__ import annotations

from pathlib import Path

import pytest

from tenantry.core.models import Principal
from tenantry.safety.policy.engine import Engine
from tenantry.safety.policy.execopts import embedded
from tenantry.safety.policy.facts import Facts
from tenantry.safety.policy.judge import Judge

CWD = "/home/alice/proj"

DENIED = [
    "tar -cf x.tar --checkpoint=1 --checkpoint-action=exec='sudo id' .",
    "tar --use-compress-program='sudo id' -cf x.tar .",
    "tar -I 'sudo id' -cf x.tar .",
    "tar --to-command='scancel 1002' -xf x.tar",
    "rsync -e 'sudo id' a b:",
    "rsync --rsh='scancel 1002' a b:",
    "ssh -o ProxyCommand='sudo id' host",
    "ssh -oProxyCommand='sudo id' host",
    "ssh -o 'ProxyCommand sudo id' host",
    "scp -o LocalCommand='sudo id' a host:",
    "zip -T -TT 'sudo id' x.zip a",
    "zip x.zip a -T --unzip-command='sudo id'",
    "vim -c '!sudo id' x",
    "vim -c ':!scancel 1002'",
    "vi +'!sudo id' x",
    "vim -c 'call system(\"id\")' x",
    "sed 's/x/y/e' f",
    "sed -n '1e sudo id' f",
    "sed 'e' f",
    "env --split-string='sudo id'",
    "less +'!sudo id' f",
    "man -P 'sudo id' ls",
    "gdb -batch -ex '!sudo id'",
    "expect -c 'spawn sudo id'",
    "git -c core.sshCommand='sudo id' fetch",
    "find . -exec sudo id \\;",
    "echo x | xargs -I{} sudo id",
    "awk 'BEGIN{system(\"sudo id\")}'",
    "perl -e 'open(F, \"|sudo id\")'",
    "env -S 'sudo id'",
    "LD_PRELOAD=/tmp/x.so ls",
]

ALLOWED = [
    "tar -czf out.tar.gz results/",
    "tar --use-compress-program=zstd -cf x.tar.zst data",
    "rsync -av -e ssh results/ login2:backup/",
    "ssh -o ProxyCommand=none -o BatchMode=yes login2 hostname",
    "zip -r out.zip results",
    "vim -c 'set number' notes.txt",
    "sed -i 's/old/new/g' config.yaml",
    "sed -n '/error/p' job.out",
    "sed 's/e/E/' f",
    "less +G job.out",
    "gdb -batch -ex bt ./a.out core",
]


@pytest.mark.parametrize("command", DENIED)
def test_exec_option_denied(judge: Judge, agent: Principal, command: str) -> None:
    d = judge.evaluate(agent, "run_command", {"command": command, "cwd": CWD})
    assert not d.allowed, (command, d.rule)


@pytest.mark.parametrize("command", ALLOWED)
def test_ordinary_use_allowed(judge: Judge, agent: Principal, command: str) -> None:
    d = judge.evaluate(agent, "run_command", {"command": command, "cwd": CWD})
    assert d.allowed, (command, d.rule, d.message)


def test_embedded_reads_the_command() -> None:
    assert embedded("ssh", ["-o", "ProxyCommand=nc %h %p", "h"]).commands == ["nc %h %p"]
    assert embedded("tar", ["--checkpoint-action=exec=echo hi"]).commands == ["echo hi"]
    assert embedded("sed", ["s/a/b/e"]).opaque


def test_make_recipes_are_judged(facts: Facts, agent: Principal, tmp_path: Path) -> None:
    """Slurm clients run through make: the recipe is what runs."""
    judge = Judge(Engine(), facts, read_files=True, hour=12)
    (tmp_path / "Makefile").write_text("all:\n\t@echo building\n\tscancel -u bob\n")
    d = judge.evaluate(agent, "run_command", {"command": "make", "cwd": str(tmp_path)})
    assert not d.allowed
    assert d.rule == "agent-not-others-jobs"
    (tmp_path / "Makefile").write_text("all:\n\t$(CC) -o app main.c\n\techo done\n")
    ok = judge.evaluate(agent, "run_command", {"command": "make -j4", "cwd": str(tmp_path)})
    assert ok.allowed, ok.message
    over = judge.evaluate(agent, "run_command", {"command": "make CC=sudo", "cwd": str(tmp_path)})
    assert not over.allowed
    (tmp_path / "Makefile").write_text("X := $(shell scancel -u bob)\nall:\n\techo $(X)\n")
    sub = judge.evaluate(agent, "run_command", {"command": "make", "cwd": str(tmp_path)})
    assert not sub.allowed
