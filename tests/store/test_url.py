"""Store URLs: which engine, and a password never shown."""

from __future__ import annotations

import pytest

from tenantry.cli.daemon import checks
from tenantry.core.errors import UsageError
from tenantry.core.settings import load
from tenantry.store import mask_url, open_store
from tenantry.store.postgres import PostgresStore, translate
from tenantry.store.sqlite import SQLiteStore
from tenantry.store.url import scrub

SECRET = "pa:ss@w0rd"
URL = "postgresql://ann:pa%3Ass%40w0rd@db.example:5433/tenantry?sslmode=require"


def test_the_url_picks_the_engine() -> None:
    assert isinstance(open_store("sqlite:///var/lib/t/s.db"), SQLiteStore)
    assert isinstance(open_store(URL), PostgresStore)
    assert isinstance(open_store("postgres://ann@h/db"), PostgresStore)
    with pytest.raises(UsageError, match="unknown store URL 'mysql://ann:\\*\\*\\*@h/db'"):
        open_store("mysql://ann:hunter2@h/db")
    with pytest.raises(UsageError, match="absolute path"):
        open_store("sqlite://relative.db")


def test_passwords_are_masked_in_urls_and_messages() -> None:
    shown = mask_url(URL)
    assert shown == "postgresql://ann:***@db.example:5433/tenantry?sslmode=require"
    assert mask_url("postgresql://h/db?user=a&password=zz") == (
        "postgresql://h/db?user=a&password=***"
    )
    assert mask_url("postgresql://ann@h/db") == "postgresql://ann@h/db"
    text = scrub(f"FATAL for {URL}: password {SECRET} rejected", URL)
    assert SECRET not in text and "pa%3Ass" not in text


def test_settings_and_doctor_never_show_the_password() -> None:
    settings = load(env={"TENANTRY_STORE_URL": "postgresql://ann:hunter2@127.0.0.1:1/db"})
    assert "hunter2" not in repr(settings)
    assert settings.shown()["store_url"] == "postgresql://ann:***@127.0.0.1:1/db"
    (store,) = [c for c in checks(settings) if c["check"] == "store"]
    assert not store["ok"] and "hunter2" not in str(store) and "***" in store["detail"]
    embedded = load(env={"TENANTRY_STATE_DIR": "/tmp/x"})
    assert embedded.store_address == "sqlite:///tmp/x/tenantry.sqlite3"


def test_placeholders_translate_outside_quotes_only() -> None:
    assert translate("SELECT '?', \"a?\" FROM t WHERE a = ? AND b LIKE 'x%'") == (
        "SELECT '?', \"a?\" FROM t WHERE a = %s AND b LIKE 'x%%'"
    )
