"""Credentials stay out of the index: never read or served; purged if an older crawl kept them."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tenantry.core.secrets import is_secret_file
from tenantry.index import crawl
from tenantry.index.component import IndexService
from tenantry.index.grep import GrepSpec

from .conftest import index_find, index_grep_items, runtime, wait_until

SECRETS = {
    ".ssh/id_ed25519": "BEGIN OPENSSH PRIVATE KEY needle",
    ".aws/credentials": "aws_secret_access_key = needle",
    "deploy.pem": "-----BEGIN needle-----",
    ".env": "TOKEN=needle",
    "conf/.netrc": "machine h login u password needle",
}


def _tree(root: Path) -> None:
    for rel, text in {**SECRETS, "src/app.py": "print('needle')\n"}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text + "\n")


def _stored(svc: IndexService) -> set[str]:
    db = sqlite3.connect(svc.runtime.settings.state_dir + "/index.sqlite3")
    try:
        rows = db.execute("SELECT e.path FROM entries e JOIN content c ON c.id = e.id")
        return {r[0] for r in rows}
    finally:
        db.close()


@pytest.mark.parametrize(
    ("path", "secret"),
    [
        ("/w/.ssh/config", True),
        ("/w/a/.gnupg/pubring.kbx", True),
        ("/w/id_rsa", True),
        ("/w/server.key.pem", True),
        ("/w/.env.local", True),
        ("/w/.env.example", False),
        ("/h/u/.kube/config", True),  # a home's credential location
        ("/w/kube/config", False),
        ("/w/src/secrets.py", False),
    ],
)
def test_what_counts_as_a_credential_file(path: str, secret: bool) -> None:
    assert is_secret_file(path, "/h/u") is secret


async def test_credentials_are_listed_but_never_read_or_served(
    service: IndexService, tmp_path: Path
) -> None:
    root = tmp_path / "ws"
    _tree(root)
    await service.add(str(root), wait=True)
    hits = await index_grep_items(service, root, GrepSpec(pattern="needle"))
    assert {h["path"] for h in hits} == {str(root / "src/app.py")}
    assert str(root / ".ssh/id_ed25519") in await index_find(service, root)  # names stay
    assert _stored(service) == {"src/app.py"}
    # a key that appears later, through the watcher, is not read either
    (root / ".ssh" / "id_rsa").write_text("needle later\n")
    (root / "src" / "b.py").write_text("needle later\n")

    async def indexed() -> bool:
        return "src/b.py" in _stored(service)

    assert await wait_until(indexed)
    assert _stored(service) == {"src/app.py", "src/b.py"}


async def test_text_an_older_crawl_kept_is_purged_at_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "ws"
    _tree(root)
    rt = runtime(tmp_path, index_sweep_s=0)
    with monkeypatch.context() as m:  # an index built before credentials were kept out
        m.setattr(crawl, "secret", lambda path: False)
        old = IndexService(rt)
        await old.start()
        await old.add(str(root), wait=True)
        await old.aclose()
    assert _stored(old) == {"src/app.py", *SECRETS}
    svc = IndexService(runtime(tmp_path, index_sweep_s=0))
    await svc.start()
    try:
        await svc.wait_ready(str(root))
        assert _stored(svc) == {"src/app.py"}
        hits = await index_grep_items(svc, root, GrepSpec(pattern="needle"))
        assert {h["path"] for h in hits} == {str(root / "src/app.py")}
    finally:
        await svc.aclose()


def test_every_home_location_is_a_dot_entry() -> None:
    """``is_secret_file`` skips the home's patterns for paths not under a dot-entry."""
    from tenantry.core.secrets import HOME_SECRETS

    assert all(rel.startswith(".") for rel in HOME_SECRETS)
