"""Open a store from a URL, and show a URL without its password.

- ``sqlite:///ABSOLUTE/PATH`` (the embedded default: ``<state>/tenantry.sqlite3``);
- ``postgresql://USER:PASSWORD@HOST:PORT/DB`` (or ``postgres://``; any libpq
  parameter may follow ``?``, e.g. ``sslmode=require`` or ``options=-csearch_path=x``).
  Prefer a password file (``~/.pgpass``, ``passfile=``) to a password in the URL.
"""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Sequence
from typing import TYPE_CHECKING

from tenantry.core.errors import UsageError

if TYPE_CHECKING:
    from tenantry.store.engine import Schema, Store

MASK = "***"


def engine_of(url: str) -> str:
    scheme = url.partition("://")[0].lower()
    if scheme == "sqlite":
        return "sqlite"
    if scheme in ("postgresql", "postgres"):
        return "postgresql"
    raise UsageError(
        f"unknown store URL {mask_url(url)!r}",
        hint="use sqlite:///ABSOLUTE/PATH or postgresql://USER@HOST/DB",
    )


def sqlite_path(url: str) -> str:
    path = os.path.expanduser(urllib.parse.unquote(url[len("sqlite://") :]))
    if not path.startswith("/"):
        raise UsageError(
            f"a sqlite store URL needs an absolute path, not {url!r}",
            hint="write sqlite:///home/me/state/tenantry.sqlite3 (three slashes, then the path)",
        )
    return path


def _password(url: str) -> str:
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return ""
    pw = parts.password or ""
    for key, value in urllib.parse.parse_qsl(parts.query):
        if key == "password":
            pw = pw or value
    return urllib.parse.unquote(pw)


def mask_url(url: str) -> str:
    """``url`` with any password replaced by ``***`` (fit for logs and errors)."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return MASK
    netloc = parts.netloc
    if parts.password is not None:
        user, _, host = netloc.rpartition("@")
        name = user.partition(":")[0]
        netloc = f"{name}:{MASK}@{host}"
    query = "&".join(
        f"{k}={MASK if k == 'password' else v}"
        for k, v in urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    )
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def scrub(text: str, url: str) -> str:
    """``text`` (a driver's message) without the URL's password in it."""
    pw = _password(url)
    if pw:
        text = text.replace(pw, MASK)
    return text.replace(url, mask_url(url))


def open_store(url: str, schemas: Sequence[Schema] = (), *, readers: int = 2) -> Store:
    """A store for ``url`` (not yet started: ``async with open_store(url) as store``)."""
    engine = engine_of(url)
    if engine == "sqlite":
        from tenantry.store.sqlite import SQLiteStore

        return SQLiteStore(sqlite_path(url), schemas, readers=readers)
    from tenantry.store.postgres import PostgresStore

    return PostgresStore(url, schemas, readers=readers)
