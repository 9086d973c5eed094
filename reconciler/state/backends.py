"""Which store `--state` names: a path is the local JSON file, a `postgresql://` (or
`postgres://`) URL a named state in PostgreSQL (libpq's URL and environment: PGPASSWORD,
PGSSLMODE, ...). Callers: the CLI's `_store`, tests."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from reconciler.errors import StateError
from reconciler.state.store import LocalFileStore, StateStore

DEFAULT_NAME = "default"


def is_url(text: str) -> bool:
    return text.startswith(("postgresql://", "postgres://"))


def without_password(url_or_path: str) -> str:
    """`url_or_path` as it may be printed: a URL's password (user:password@, ?password=)
    left out; libpq then takes it from PGPASSWORD or ~/.pgpass."""
    if not is_url(url_or_path):
        return url_or_path
    parts = urlsplit(url_or_path)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, hosts = netloc.rsplit("@", 1)
        netloc = f"{userinfo.split(':', 1)[0]}@{hosts}"
    query = urlencode([(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True)
                       if k != "password"])
    return urlunsplit(parts._replace(netloc=netloc, query=query))


def open_store(url_or_path: str, *, name: str = DEFAULT_NAME, schema: str | None = None,
               lock_timeout: float = 0.0) -> StateStore:
    """The store for `url_or_path`; StateError (one line, no password) when it cannot be.
    `schema`: the PostgreSQL schema (default `postgres.DEFAULT_SCHEMA`)."""
    if not is_url(url_or_path):
        if "://" in url_or_path:
            scheme = url_or_path.split("://", 1)[0]
            raise StateError(f"--state: unknown backend {scheme}://; give a file path or a "
                             "postgresql:// URL")
        if name != DEFAULT_NAME:
            raise StateError("--state-name selects a state in a PostgreSQL --state; a state "
                             "file holds one state (give another --state path instead)")
        return LocalFileStore(url_or_path, lock_timeout=lock_timeout)
    try:
        from reconciler.state.postgres import DEFAULT_SCHEMA, PostgresStore
    except ImportError:
        raise StateError("a PostgreSQL --state needs psycopg: pip install "
                         "'runai-reconcile[postgres]'") from None
    return PostgresStore(url_or_path, name=name, schema=schema or DEFAULT_SCHEMA,
                         lock_timeout=lock_timeout)
