"""The daemon's hook submits a plain ``sbatch SCRIPT`` itself (scripted daemon; the real
one on real Slurm is tests/slurm/test_hook_submit_e2e.py)."""

from __future__ import annotations

import io
import json
import os
import shlex
from pathlib import Path
from typing import Any

import pytest

from tenantry.agents import hook, submit_line
from tenantry.client.wire import ENV_DIGEST, ENV_LATEST
from tenantry.core import errors
from tenantry.jobs.request import JobRequest

from .test_hook import PRE, Daemon, denied, with_command

SCRIPT = '#!/bin/sh\n#SBATCH --cpus-per-task=2\nsleep "${1:-10}"\n'


@pytest.fixture
def work(tmp_path: Path) -> Path:
    (tmp_path / "job.sh").write_text(SCRIPT)
    return tmp_path


def test_the_days_sbatch_is_read_as_the_request_sbatch_would_make(work: Path) -> None:
    command = f"sbatch --parsable -J day-job -t 2 -c 1 --mem 64M -o {work}/job-%j.out job.sh 10"
    line = submit_line.read(command, str(work))
    assert line is not None and line.parsable
    assert line.params == {
        "name": "day-job",
        "output": f"{work}/job-%j.out",
        "script": str(work / "job.sh"),
        "script_text": SCRIPT,
        "args": ["10"],
        "cwd": str(work),
        "resources": {"cpus": 1},
        "extra": ["--time=2", "--mem=64M"],
        ENV_DIGEST: ENV_LATEST,
    }
    assert line.printed("4242") == "4242"
    # the one request model reads it as Slurm does: the command line over #SBATCH
    request = JobRequest.from_params({**line.params, "env": {}}).checked()
    assert (request.shape.time_s, request.shape.mem_mb, request.shape.cpus) == (120, 64, 1)


def test_without_output_the_file_is_sbatchs_default(work: Path) -> None:
    line = submit_line.read("sbatch job.sh", str(work))
    assert line is not None and not line.parsable
    assert line.params["output"] == "slurm-%j.out" and line.params["resources"] == {}
    assert line.printed("7") == "Submitted batch job 7"
    array = submit_line.read("sbatch --array=1-3 -p debug -A proj job.sh", str(work))
    assert array is not None and array.params["output"] == "slurm-%A_%a.out"
    assert array.params["resources"] == {"partition": "debug", "account": "proj"}
    assert array.params["array"] == "1-3"


@pytest.mark.parametrize(
    "command",
    [
        "sbatch --wrap 'sleep 1'",  # a shell command, not a script
        "sbatch",  # the script on stdin
        "sbatch < job.sh",
        "sbatch job.sh | tee out",
        "FOO=1 sbatch job.sh",
        "sbatch $HOME/job.sh",
        "sbatch j*.sh",
        "sbatch ~/job.sh",
        "sbatch -D /elsewhere job.sh",  # where the script is read from changes
        "sbatch --exclusive job.sh",  # an option the hook does not read
        "sbatch --no-such-option job.sh",
        "sbatch --par job.sh",  # --parsable or --partition: ambiguous to Slurm too
        "sbatch -c two job.sh",
        "sbatch missing.sh",
        "sbatch notascript.sh",
        "sbatch .",
        "sbatch fifo.sh",
        "srun job.sh",
    ],
)
def test_what_the_hook_cannot_read_exactly_is_left_to_the_redirect(
    work: Path, command: str
) -> None:
    (work / "notascript.sh").write_text("sleep 1\n")
    os.mkfifo(work / "fifo.sh")  # reading it would block the hook
    assert submit_line.read(command, str(work)) is None
    assert submit_line.read("sbatch job.sh", "relative/dir") is None


class SubmitDaemon(Daemon):
    """Answers ``jobs.submit`` with a handed job (or raises ``exc``)."""

    def __init__(self, exc: Exception | None = None, existing: bool = False) -> None:
        super().__init__()
        self.submit_exc, self.existing = exc, existing

    def __call__(self, op: str, params: dict[str, Any]) -> Any:
        if op != "jobs.submit":
            return super().__call__(op, params)
        self.calls.append((op, params))
        if self.submit_exc is not None:
            raise self.submit_exc
        job = {"id": "t9", "backend_id": "4242", "state": "PENDING"}
        note = "existing job t9: identical to the job submitted 3 s ago" if self.existing else ""
        return {"job": job, "existing": self.existing, "note": note}


def _ask(
    work: Path, command: str, daemon: Daemon, *, submit: bool = True, **payload: Any
) -> str | None:
    body = with_command("claude-code", PRE["claude-code"], command)
    body.update(cwd=str(work), permission_mode="bypassPermissions", tool_use_id="toolu_01")
    body.update(payload)
    out = io.StringIO()
    hook.run("claude-code", io.StringIO(json.dumps(body)), out, io.StringIO(),
             checker_factory=lambda a, s: daemon, env={}, submit=submit)  # fmt: skip
    text = out.getvalue().strip()
    return denied("claude-code", json.loads(text) if text else None)


def test_the_daemons_hook_submits_and_answers_with_sbatchs_line(work: Path) -> None:
    daemon = SubmitDaemon()
    msg = _ask(work, "sbatch -J x -t 5 job.sh", daemon)
    assert msg and msg.startswith(hook.ANSWERED), msg
    assert msg.endswith("\nSubmitted batch job 4242") and "t9" in msg and "again" in msg
    assert daemon.ops() == ["jobs.submit"]  # the op is the record: no telemetry.hook
    params = daemon.calls[0][1]
    assert params["name"] == "x" and params["extra"] == ["--time=5"]
    parsable = _ask(work, "sbatch --parsable job.sh", SubmitDaemon())
    assert parsable and parsable.endswith("\n4242")
    again = _ask(work, "sbatch job.sh", SubmitDaemon(existing=True))
    assert again and again.startswith(hook.ANSWERED) and "existing job t9" in again


@pytest.mark.parametrize(
    ("submit", "payload"),
    [
        (False, {}),  # a hook process deciding alone never submits
        (True, {"permission_mode": "default"}),  # Claude Code would ask the human first
        (True, {"permission_mode": "acceptEdits"}),
        (True, {"tool_use_id": ""}),  # no tool call to key the submission on
    ],
)
def test_no_submission_outside_its_conditions(
    work: Path, submit: bool, payload: dict[str, Any]
) -> None:
    daemon = SubmitDaemon()
    msg = _ask(work, "sbatch job.sh", daemon, submit=submit, **payload)
    assert msg and "tenantry submit" in msg and not msg.startswith(hook.ANSWERED)
    assert "jobs.submit" not in daemon.ops()


@pytest.mark.parametrize(
    "exc",
    [
        errors.PolicyDenied("agent arrays may have at most 1000 tasks"),
        errors.BudgetExceeded("the session's job budget is spent"),
        errors.SessionStopped("stopped by an operator"),
        errors.EnvUnknown("no environment"),  # the session sent none yet
        errors.SubmissionRejected("sbatch: error: invalid partition"),
    ],
)
def test_a_refused_submission_falls_back_to_the_redirect(work: Path, exc: Exception) -> None:
    daemon = SubmitDaemon(exc)
    msg = _ask(work, "sbatch job.sh", daemon)
    assert msg and "tenantry submit" in msg and not msg.startswith(hook.ANSWERED)
    assert daemon.ops() == ["jobs.submit", "telemetry.hook"]


def test_an_unconfirmed_submission_is_held_not_run(work: Path) -> None:
    daemon = SubmitDaemon(errors.Unavailable("jobs.submit did not answer in time"))
    msg = _ask(work, "sbatch job.sh", daemon)
    assert msg and not msg.startswith(hook.ANSWERED) and "not confirmed" in msg
    assert "tenantry jobs" in msg and daemon.ops() == ["jobs.submit", "telemetry.hook"]


def test_unreadable_commands_cost_no_submission(work: Path) -> None:
    for command in ("sbatch --wrap 'sleep 1'", shlex.join(["sbatch", "--exclusive", "job.sh"])):
        daemon = SubmitDaemon()
        msg = _ask(work, command, daemon)
        assert msg and "tenantry submit" in msg and "jobs.submit" not in daemon.ops()


def test_the_daemons_hook_stops_waiting_for_a_slow_op(monkeypatch: pytest.MonkeyPatch) -> None:
    """A submission's wait ends inside the agent's own hook timeout, as ``Unavailable``."""
    import concurrent.futures

    from tenantry.gateway import hookserve

    assert hookserve.SUBMIT_WAIT_S < 10  # Claude Code gives the http hook 10 s
    monkeypatch.setattr(hookserve, "SUBMIT_WAIT_S", 0.05)
    monkeypatch.setattr(hookserve, "OP_TIMEOUT_S", 0.05)
    pending: concurrent.futures.Future[Any] = concurrent.futures.Future()
    for op in ("jobs.submit", "policy.check"):
        with pytest.raises(errors.Unavailable, match=f"{op} did not answer in time"):
            hookserve.result_of(pending, op)
    done: concurrent.futures.Future[Any] = concurrent.futures.Future()
    done.set_result({"ok": 1})
    assert hookserve.result_of(done, "jobs.submit") == {"ok": 1}
