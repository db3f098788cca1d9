"""Path resolution before scope checks: symlinks, .., /proc detours, look-alikes, globs."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tenantry.safety.policy.paths import PathContext, classify, skeleton

CTX = PathContext(cwd="/home/alice/proj", home="/home/alice", user="alice",
                  protected=("/home/alice/.local/state/tenantry",))  # fmt: skip


@pytest.mark.parametrize(
    "raw",
    [
        "~/.ssh/id_rsa",
        "../.ssh/id_ed25519",
        "/home/alice/proj/../../alice/.netrc",
        "/proc/self/root/etc/munge/munge.key",
        "/proc/thread-self/root/home/alice/.aws/credentials",
        "/proc/self/cwd/../.ssh/config",
        "~/.\u0455sh/id_rsa",
        "~/.s\u200bsh/id_rsa",
        "~/.ssh\uff0fid_rsa",
        "~/.ss?/id_*",
        "/etc/munge/*",
        "$HOME/.netrc",
        "${HOME}/.pgpass",
        "~bob/.ssh/authorized_keys",
        "/proc/1/environ",
        "/etc/ssh/ssh_host_ed25519_key",
        "id_ed25519",
    ],
)
def test_credentials_are_found_in_every_disguise(raw: str) -> None:
    ctx = dataclasses.replace(CTX, cwd="/home/alice/.ssh") if raw == "id_ed25519" else CTX
    assert classify(raw, ctx).credential, raw


@pytest.mark.parametrize(
    "raw", ["src/main.py", "/tmp/x", "~/*", "~/proj/.gitignore", "/etc/hosts", "README.md"]
)
def test_ordinary_paths_are_not_credentials(raw: str) -> None:
    assert not classify(raw, CTX).credential, raw


def test_symlink_to_a_key_is_resolved(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("k")
    link = tmp_path / "innocent.txt"
    link.symlink_to(home / ".ssh" / "id_rsa")
    ctx = PathContext(cwd=str(tmp_path), home=str(home), user="alice")
    info = classify("innocent.txt", ctx)
    assert info.credential and info.path == str(home / ".ssh" / "id_rsa")


def test_classes() -> None:
    assert classify("/etc/motd", CTX).system
    assert not classify("/var/tmp/x", CTX).system
    assert classify("~/.local/state/tenantry/audit.log", CTX).protected
    assert classify("/home/bob/x", CTX).other_home
    assert not classify("/home/alice/x", CTX).other_home
    assert classify("~/.\u0455sh", CTX).lookalike


def test_skeleton_folds_lookalikes() -> None:
    assert skeleton("\u0455\u0455h") == "ssh"
    assert skeleton("ＳＳＨ") == "SSH"
    assert skeleton("plain") == "plain"


def test_root_home_is_a_home_for_root() -> None:
    ctx = PathContext(cwd="/root/work", home="/root", user="root")
    assert not classify("/root/work/x.py", ctx).credential
    assert not classify("/root/work/x.py", ctx).system
    assert classify("/root/.ssh/id_rsa", ctx).credential
