"""Agents' transcripts and humans' shell histories: the behavioural table, measured."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tenantry.report import actions, metrics, sources

T0 = datetime(2026, 1, 7, 14, 0, tzinfo=UTC)  # a Wednesday, 08:00 in Chicago


def iso(t: datetime) -> str:
    return t.isoformat().replace("+00:00", "Z")


def claude_session(home: Path, session: str, n: int, start: datetime) -> Path:
    """~/.claude/projects/<project>/<session>.jsonl with n Read/Edit/Bash cycles."""
    d = home / ".claude" / "projects" / "-home-ana-proj"
    d.mkdir(parents=True, exist_ok=True)
    lines: list[dict[str, object]] = [{"type": "summary", "summary": "fix tests", "leafUuid": "l0"}]
    tools = [
        ("Read", {"file_path": "/home/ana/proj/a.py"}),
        ("Edit", {"file_path": "/home/ana/proj/a.py", "old_string": "a", "new_string": "b"}),
        ("Bash", {"command": "python -m pytest -x"}),
    ]
    for i in range(n):
        name, args = tools[i % 3]
        lines.append(
            {
                "type": "assistant",
                "uuid": f"u{i}",
                "parentUuid": f"u{i - 1}",
                "sessionId": session,
                "timestamp": iso(start + timedelta(seconds=20 * i)),
                "message": {
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": "next"},
                        {
                            "type": "tool_use",
                            "id": f"toolu_{session}_{i}",
                            "name": name,
                            "input": args,
                        },
                    ],
                },
            }
        )
        lines.append(
            {"type": "user", "uuid": f"r{i}", "sessionId": session, "timestamp": iso(start)}
        )
    p = d / f"{session}.jsonl"
    p.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return p


def codex_rollout(home: Path, n: int, start: datetime, zoneless: bool = False) -> Path:
    d = home / ".codex" / "sessions" / "2026" / "01" / "07"
    d.mkdir(parents=True, exist_ok=True)

    def ts(t: datetime) -> str:
        return t.replace(tzinfo=None).isoformat() if zoneless else iso(t)

    lines: list[dict[str, object]] = [
        {"timestamp": ts(start), "type": "session_meta", "payload": {"id": "cx-1", "cwd": "/w"}}
    ]
    cmds = [
        ["bash", "-lc", "rg foo"],
        ["bash", "-lc", "sed -i s/a/b/ x.py"],
        ["bash", "-lc", "make test"],
    ]
    for i in range(n):
        lines.append(
            {
                "timestamp": ts(start + timedelta(seconds=30 * i)),
                "type": "response_item",
                "payload": {
                    "type": "function_call",
                    "name": "shell",
                    "arguments": json.dumps({"command": cmds[i % 3]}),
                    "call_id": f"call_{i}",
                },
            }
        )
    p = d / "rollout-2026-01-07T14-00-00-cx-1.jsonl"
    p.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return p


def gemini_chat(home: Path, n: int, start: datetime) -> Path:
    d = home / ".gemini" / "tmp" / "abc123" / "chats"
    d.mkdir(parents=True, exist_ok=True)
    names = ["read_file", "replace", "run_shell_command"]
    msgs = [
        {
            "id": f"m{i}",
            "timestamp": iso(start + timedelta(seconds=40 * i)),
            "type": "gemini",
            "content": "",
            "toolCalls": [
                {
                    "id": f"tc{i}",
                    "name": names[i % 3],
                    "args": {"command": "npm test"} if i % 3 == 2 else {"file_path": "x"},
                    "status": "success",
                    "timestamp": iso(start + timedelta(seconds=40 * i)),
                }
            ],
        }
        for i in range(n)
    ]
    doc = {"sessionId": "gm-1", "projectHash": "abc123", "startTime": iso(start), "messages": msgs}
    p = d / "session-2026-01-07T14-00-gm1.json"
    p.write_text(json.dumps(doc, indent=2))
    return p


def bash_history(home: Path, times: list[datetime], cmds: list[str]) -> Path:
    p = home / ".bash_history"
    p.write_text("".join(f"#{int(t.timestamp())}\n{c}\n" for t, c in zip(times, cmds, strict=True)))
    return p


def zsh_history(home: Path, times: list[datetime], cmds: list[str]) -> Path:
    p = home / ".zsh_history"
    p.write_text(
        "".join(f": {int(t.timestamp())}:0;{c}\n" for t, c in zip(times, cmds, strict=True))
    )
    return p


def test_sniff_each_format(tmp_path: Path) -> None:
    home = tmp_path / "home" / "ana"
    assert sources.sniff(claude_session(home, "s1", 3, T0)) == "claude"
    assert sources.sniff(codex_rollout(home, 3, T0)) == "codex"
    assert sources.sniff(gemini_chat(home, 3, T0)) == "gemini"
    assert sources.sniff(bash_history(home, [T0], ["ls"])) == "history"
    assert sources.sniff(zsh_history(home, [T0], ["ls"])) == "history"


def test_behavioural_table_from_transcripts_and_histories(tmp_path: Path) -> None:
    home = tmp_path / "home" / "ana"
    # agents: 180 + 120 + 90 commands inside one hour each
    c = claude_session(home, "s1", 180, T0)
    x = codex_rollout(home, 120, T0)
    g = gemini_chat(home, 90, T0)
    # the human: 6 commands in each of 3 office hours (Chicago), bash and zsh
    times = [T0 + timedelta(hours=h, minutes=5 * k) for h in range(3) for k in range(6)]
    cmds = ["ls", "vim a.py", "python run.py"] * 6
    b = bash_history(home, times[:9], cmds[:9])
    z = zsh_history(home, times[9:], cmds[9:])
    data = sources.load([c, x, g, b, z], local_tz="America/Chicago")
    r = metrics.build(data, tz="America/Chicago")["behaviour"]
    assert r["agent"]["commands"] == 390 and r["agent"]["active_hours"] == 3
    assert r["human"]["commands"] == 18 and r["human"]["active_hours"] == 3
    assert r["agent"]["rate_per_hour"] == pytest.approx(130.0)
    assert r["human"]["rate_per_hour"] == pytest.approx(6.0)
    assert r["ratio"] == pytest.approx(130 / 6, rel=1e-3)
    # every agent did explore -> modify -> execute in turn
    assert r["agent"]["loop_shape_pct"] == {"explore": 33.33, "modify": 33.33, "execute": 33.33}
    assert r["agent"]["explore_modify_execute_cycles"] == 60 + 40 + 30
    assert r["human"]["night_pct"] == 0.0 and r["human"]["weekend_pct"] == 0.0


def test_snapshot_copies_are_counted_once(tmp_path: Path) -> None:
    home = tmp_path / "home" / "ana"
    c = claude_session(home, "s1", 30, T0)
    backup = tmp_path / "home" / "ana" / "backup.jsonl"
    backup.write_text(c.read_text())
    data = sources.load([c, backup])
    assert data.actions is not None and data.actions.height == 30
    assert data.combined["duplicate_actions_dropped"] == 30


def test_zoneless_local_times_are_read_in_the_facility_zone(tmp_path: Path) -> None:
    home = tmp_path / "home" / "ana"
    # 14:00 written without a zone, meaning Chicago local time (20:00 UTC)
    x = codex_rollout(home, 3, datetime(2026, 1, 7, 14, 0), zoneless=True)
    data = sources.load([x], local_tz="America/Chicago")
    assert data.actions is not None
    assert data.actions["ts"].min() == datetime(2026, 1, 7, 20, 0, tzinfo=UTC)
    assert any("no zone; read as America/Chicago" in n for n in data.stats[0].notes)


def test_broken_lines_are_reported(tmp_path: Path) -> None:
    home = tmp_path / "home" / "ana"
    c = claude_session(home, "s1", 3, T0)
    c.write_text(c.read_text() + "{not json\n")
    data = sources.load([c])
    [bad] = data.stats[0].unreadable
    assert bad.line == 8 and bad.reason.startswith("not JSON")


def test_shell_categories() -> None:
    cat = actions.shell_category
    assert [
        cat("ls -la"),
        cat("git diff"),
        cat("FOO=1 sed -i s/a/b/ f"),
        cat("git commit -m x"),
    ] == [
        "explore",
        "explore",
        "modify",
        "modify",
    ]
    assert cat("sudo make -j4") == "execute" and cat("sbatch run.sh") == "execute"
    assert actions.tool_category("Bash", "cat x | grep y") == "explore"
    assert actions.tool_category("Edit", None) == "modify"
