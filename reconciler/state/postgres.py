"""The state in PostgreSQL: a row per version, the journal as rows, a session lock per name.

    PostgresStore("postgresql://user@host/db", name="default", schema="runai_reconcile")

Same contract as `store.LocalFileStore` (read, read_with_pending, write, append,
has_journal, lock, force_unlock, read_backup), for teams and CI sharing one state. The
layout (docs/state-backends.md), created on first use in `schema`:

    meta      (key, value)                 'schema_version' -> SCHEMA_VERSION
    states    (id, name, created_at, lock_id, lock_operation, lock_user, lock_host,
               lock_pid, lock_since, lock_backend_pid, lock_backend_start)  a row per name
    versions  (state_id, serial, lineage, body jsonb, written_at, written_by, operation)
    journal   (state_id, n, entry jsonb, written_at)        one row per journal entry

A write is a compare-and-swap in one transaction: the name's `states` row is locked
(FOR UPDATE), the newest version read and checked (lineage, serial), a new version row
inserted and the journal emptied. The lock is a session advisory lock keyed by (the
`states` table's oid, the name's row id): one per name and schema, and it dies with the
holder's database session, so a killed holder never leaves it behind; who holds it is
in the name's `states` row for every other client to read. The session must stay one
server session of its own: a pooler in transaction mode is refused when it shows (our
statements reach a new backend, or the lock is granted to a session the holder record
already names).
Callers: `open_store` (the factory behind `--state`), tests.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import logging
import os
import re
import threading
import time
import weakref
import zlib
from typing import Callable, Hashable, Iterator
from urllib.parse import quote

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from reconciler.errors import StateError
from reconciler.state.locking import LockInfo, identity, take_or_wait, who
from reconciler.state.model import State
from reconciler.state.store import Version, _Store, loads

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1
DEFAULT_SCHEMA = "runai_reconcile"
CONNECT_TIMEOUT = 10  # seconds, unless the URL or PGCONNECT_TIMEOUT says otherwise
# The server drops a holder cut off from the network after about idle + interval * count
# seconds (TCP keepalive of its session), which releases the lock; an idle session (an
# apply waiting on the API) is never ended for its idleness while it holds the lock.
SESSION_SETTINGS = {"tcp_keepalives_idle": "30", "tcp_keepalives_interval": "10",
                    "tcp_keepalives_count": "3"}
SESSION_SETTINGS_14 = {"idle_session_timeout": "0"}  # PostgreSQL 14 and later

_IDENT = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_LOCK_COLUMNS = ("lock_id, lock_operation, lock_user, lock_host, lock_pid, lock_since, "
                 "lock_backend_pid, lock_backend_start")

_DDL = """
CREATE SCHEMA IF NOT EXISTS {s};
CREATE TABLE IF NOT EXISTS {s}.meta (
    key text PRIMARY KEY,
    value text NOT NULL);
CREATE TABLE IF NOT EXISTS {s}.states (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name text NOT NULL UNIQUE,
    created_at timestamptz NOT NULL DEFAULT now(),
    lock_id text, lock_operation text, lock_user text, lock_host text, lock_pid integer,
    lock_since timestamptz, lock_backend_pid integer, lock_backend_start timestamptz);
CREATE TABLE IF NOT EXISTS {s}.versions (
    state_id bigint NOT NULL REFERENCES {s}.states (id),
    serial bigint NOT NULL,
    lineage text NOT NULL,
    body jsonb NOT NULL,
    written_at timestamptz NOT NULL DEFAULT now(),
    written_by text NOT NULL,
    operation text NOT NULL,
    PRIMARY KEY (state_id, serial));
CREATE TABLE IF NOT EXISTS {s}.journal (
    state_id bigint NOT NULL REFERENCES {s}.states (id),
    n bigint GENERATED ALWAYS AS IDENTITY,
    entry jsonb NOT NULL,
    written_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (state_id, n));
INSERT INTO {s}.meta (key, value) VALUES ('schema_version', {v}) ON CONFLICT (key) DO NOTHING;
"""


def describe(url: str) -> dict[str, str]:
    """Host, port, database and user the URL (and libpq's environment) point at; never the
    password. For messages before a connection exists."""
    try:
        params = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        raise StateError("--state: not a valid PostgreSQL URL (postgresql://[user@]host"
                         "[:port]/database[?param=value])") from None
    user = params.get("user") or os.environ.get("PGUSER") or identity()[0]
    return {"host": params.get("host") or os.environ.get("PGHOST") or "localhost",
            "port": params.get("port") or os.environ.get("PGPORT") or "5432",
            "dbname": params.get("dbname") or os.environ.get("PGDATABASE") or user,
            "user": user}


def _reason(exc: BaseException, secrets: tuple[str, ...]) -> str:
    """libpq's message in one line, without its host prefix and without any secret."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    text = re.sub(r"^connection failed: ", "", text)
    text = re.sub(r'^connection to server (at|on socket) "[^"]*"(, port \d+)? failed: ', "", text)
    text = re.sub(r"^(FATAL|ERROR):\s+", "", text)
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


_STORES: "weakref.WeakSet[PostgresStore]" = weakref.WeakSet()


def _after_fork_in_child() -> None:
    # A forked child (a spec loader) must never speak on, nor close, its parent's session:
    # libpq's goodbye at the child's exit would end it and drop the parent's lock. The
    # child's copy of the socket is pointed at /dev/null; it connects anew if it must.
    for store in list(_STORES):
        conn, store._conn = store._conn, None
        if conn is not None and not conn.closed:
            null = os.open(os.devnull, os.O_RDWR)
            os.dup2(null, conn.fileno())
            os.close(null)


os.register_at_fork(after_in_child=_after_fork_in_child)


class PostgresStore(_Store):
    """A named state in a PostgreSQL database (see the module's docstring)."""

    def __init__(self, url: str, *, name: str = "default", schema: str = DEFAULT_SCHEMA,
                 lock_timeout: float = 0.0, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep):
        super().__init__()
        if not name or len(name) > 200 or not name.isprintable():
            raise StateError(f"--state-name: expected 1 to 200 printable characters, got {name!r}")
        if not _IDENT.fullmatch(schema):
            raise StateError(f"state schema {schema!r}: expected a lower-case SQL name "
                             "(letters, digits, _; at most 63)")
        self._url = url
        self.server = describe(url)
        password = conninfo_to_dict(url).get("password") or ""
        self._secrets = (password, quote(password, safe=""), os.environ.get("PGPASSWORD", ""))
        self.name, self.schema = name, schema
        self.lock_timeout = lock_timeout
        self._clock, self._sleep = clock, sleep
        s = self.server
        self.where = (f"postgresql://{s['user']}@{s['host']}:{s['port']}/{s['dbname']} "
                      f"(schema {schema}, state {name!r})")
        self.journal_where = f"{self.where} journal"
        self._s = sql.Identifier(schema)
        self._conn: psycopg.Connection | None = None
        self._backend_pid: int | None = None  # pg_backend_pid() of our session
        self._backend_start: _dt.datetime | None = None  # with the pid: the session's identity
        self._key1: int | None = None  # the states table's oid, as the lock's first key
        self._id: int | None = None  # the name's row in states
        self._loaded_serial: int | None = None
        self._backup_serial: int | None = None
        self._connect_lock = threading.Lock()
        _STORES.add(self)

    # --- connection ----------------------------------------------------------------

    @contextlib.contextmanager
    def _errors(self, doing: str) -> Iterator[None]:
        """psycopg's errors as one StateError line naming the server, never a password."""
        try:
            yield
        except psycopg.Error as exc:
            s = self.server
            raise StateError(
                f"PostgreSQL state backend (host {s['host']} port {s['port']}, database "
                f"{s['dbname']}): cannot {doing}: {_reason(exc, self._secrets)}") from None

    def _db(self) -> psycopg.Connection:
        with self._connect_lock:
            if self._conn is None:
                self._conn = self._connect()
            return self._conn

    def _connect_args(self) -> dict[str, object]:
        extra: dict[str, object] = {}
        params = conninfo_to_dict(self._url)
        if "connect_timeout" not in params and "PGCONNECT_TIMEOUT" not in os.environ:
            extra["connect_timeout"] = CONNECT_TIMEOUT
        if "application_name" not in params and "PGAPPNAME" not in os.environ:
            extra["application_name"] = "runai-reconcile"
        return extra

    def _connect_plain(self) -> psycopg.Connection:
        """A database session of its own with this store's settings (keepalives), for
        `election`'s controller lock; StateError (no password) when it cannot be had."""
        with self._errors("connect"):
            conn = psycopg.connect(self._url, autocommit=True, **self._connect_args())
            settings = sql.SQL(", ").join(
                sql.SQL("set_config({}, {}, false)").format(sql.Literal(k), sql.Literal(v))
                for k, v in SESSION_SETTINGS.items())
            conn.execute(sql.SQL("SELECT {}").format(settings))
        return conn

    def _connect(self) -> psycopg.Connection:
        extra = self._connect_args()
        with self._errors("connect"):
            conn = psycopg.connect(self._url, autocommit=True, **extra)
        weakref.finalize(self, conn.close)
        with self._errors("read the state schema"):
            try:
                self._check_schema(conn)
            except psycopg.errors.UndefinedTable:
                self._create_schema(conn)
                self._check_schema(conn)
        return conn

    def _check_schema(self, conn: psycopg.Connection) -> None:
        wanted = dict(SESSION_SETTINGS)
        if conn.info.server_version >= 140000:
            wanted.update(SESSION_SETTINGS_14)
        settings = sql.SQL(", ").join(
            sql.SQL("set_config({}, {}, false)").format(sql.Literal(k), sql.Literal(v))
            for k, v in wanted.items())
        row = conn.execute(sql.SQL(
            "SELECT pg_backend_pid(), (SELECT value FROM {s}.meta WHERE key = 'schema_version'), "
            "{t}::regclass::oid::bigint, (SELECT backend_start FROM pg_stat_activity "
            "WHERE pid = pg_backend_pid()), {settings}").format(
                s=self._s, t=sql.Literal(f"{self.schema}.states"), settings=settings)).fetchone()
        self._backend_pid, version, oid, self._backend_start = row[:4]
        self._key1 = oid - 2**32 if oid >= 2**31 else oid  # an oid, as a signed int4
        if version is None:
            raise StateError(f"the state schema {self.schema} in {self.where.split(' ')[0]} "
                             "has no schema_version in its meta table; is it runai-reconcile's?")
        if int(version) > SCHEMA_VERSION:
            raise StateError(
                f"the state schema {self.schema} in {self.where.split(' ')[0]} has layout "
                f"version {version}, not one this runai-reconcile knows (up to {SCHEMA_VERSION}); "
                "use a newer runai-reconcile or another --state schema")

    def _create_schema(self, conn: psycopg.Connection) -> None:
        # Two first uses at once: the second waits for the first's DDL (milliseconds) and
        # then finds the tables; no other state name or lock is ever blocked by this.
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)",
                         (zlib.crc32(f"runai-reconcile schema {self.schema}".encode()),))
            conn.execute(sql.SQL(_DDL).format(s=self._s, v=sql.Literal(str(SCHEMA_VERSION))))

    def close(self) -> None:
        with self._connect_lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def _state_id(self, *, create: bool) -> int | None:
        """The name's row id; created when `create` (an INSERT is no plan's business)."""
        if self._id is None:
            conn = self._db()
            with self._errors("read the state"):
                row = conn.execute(sql.SQL("SELECT id FROM {s}.states WHERE name = %s").format(
                    s=self._s), (self.name,)).fetchone()
                if row is None and create:
                    conn.execute(sql.SQL("INSERT INTO {s}.states (name) VALUES (%s) "
                                         "ON CONFLICT (name) DO NOTHING").format(s=self._s),
                                 (self.name,))
                    row = conn.execute(sql.SQL("SELECT id FROM {s}.states WHERE name = %s")
                                       .format(s=self._s), (self.name,)).fetchone()
            self._id = None if row is None else int(row[0])
        return self._id

    def _same_session(self, backend_pid: int) -> None:
        """Refuse to go on when our statements no longer reach the backend holding the lock."""
        if self._held is not None and backend_pid != self._backend_pid:
            raise self._moved()

    def _moved(self) -> StateError:
        return StateError(
            f"{self.where}: the connection moved to another PostgreSQL session, or shares one "
            "with another client (a pooler in transaction mode, such as PgBouncer's "
            "pool_mode=transaction?); the state lock needs session pooling or a direct "
            "connection. Nothing more was written.")

    # --- the raw bytes _Store works over ------------------------------------------

    def _load_both(self) -> tuple[bytes | None, bytes | None]:
        """The newest version and the journal in one query (one consistent snapshot)."""
        with self._mutex:
            conn = self._db()
            with self._errors("read the state"):
                row = conn.execute(sql.SQL(
                    "SELECT st.id, v.body::text, (SELECT array_agg(j.entry::text "
                    "ORDER BY j.n) FROM {s}.journal j WHERE j.state_id = st.id) "
                    "FROM {s}.states st LEFT JOIN LATERAL (SELECT body FROM "
                    "{s}.versions WHERE state_id = st.id ORDER BY serial DESC LIMIT 1) v "
                    "ON true WHERE st.name = %s").format(s=self._s), (self.name,)).fetchone()
        if row is None:
            return None, None
        self._id = int(row[0])
        raw = None if row[1] is None else row[1].encode()
        return raw, _lines(row[2])

    def version_stamp(self) -> Hashable | None:
        """The newest version's serial and time and the journal's last entry, in one small
        query (the body stays on the server)."""
        with self._mutex:
            if self._state_id(create=False) is None:
                return ()
            with self._errors("read the state"):
                row = self._db().execute(sql.SQL(
                    "SELECT (SELECT serial FROM {s}.versions WHERE state_id = %(id)s ORDER BY "
                    "serial DESC LIMIT 1), (SELECT written_at::text FROM {s}.versions WHERE "
                    "state_id = %(id)s ORDER BY serial DESC LIMIT 1), (SELECT count(*) FROM "
                    "{s}.journal WHERE state_id = %(id)s), (SELECT max(n) FROM {s}.journal "
                    "WHERE state_id = %(id)s)").format(s=self._s), {"id": self._id}).fetchone()
        return tuple(row)

    def _load(self) -> bytes | None:
        """The newest version's body (inside `write`'s transaction)."""
        conn = self._db()
        row = conn.execute(sql.SQL(
            "SELECT serial, body::text FROM {s}.versions WHERE state_id = %s "
            "ORDER BY serial DESC LIMIT 1").format(s=self._s), (self._id,)).fetchone()
        self._loaded_serial = None if row is None else int(row[0])
        return None if row is None else row[1].encode()

    def _save(self, data: bytes, backup: bytes | None) -> None:
        """A new version row (inside `write`'s transaction); history replaces `.backup`."""
        if not self._backed_up:
            self._backup_serial = self._loaded_serial
        operation = self._held_info.operation if self._held_info is not None else "write"
        try:
            self._db().execute(sql.SQL(
                "INSERT INTO {s}.versions (state_id, serial, lineage, body, written_by, "
                "operation) SELECT %s, (b->>'serial')::bigint, b->>'lineage', b, %s, %s "
                "FROM (SELECT %s::jsonb AS b) doc").format(s=self._s),
                (self._id, who(*identity()), operation, data.decode()))
        except psycopg.errors.UniqueViolation:
            raise StateError(f"refusing to write state {self.where}: it was changed by "
                             "someone else since it was read; run the command again") from None

    def _load_journal(self) -> bytes | None:
        with self._mutex:
            if self._state_id(create=False) is None:
                return None
            with self._errors("read the journal"):
                row = self._db().execute(sql.SQL(
                    "SELECT array_agg(entry::text ORDER BY n) FROM {s}.journal "
                    "WHERE state_id = %s").format(s=self._s), (self._id,)).fetchone()
        return _lines(row[0])

    def has_journal(self) -> bool:
        with self._mutex:
            if self._state_id(create=False) is None:
                return False
            with self._errors("read the journal"):
                return bool(self._db().execute(sql.SQL(
                    "SELECT EXISTS (SELECT 1 FROM {s}.journal WHERE state_id = %s)").format(
                        s=self._s), (self._id,)).fetchone()[0])

    def _append_journal(self, data: bytes) -> None:
        """One row per entry, in one statement and transaction (one commit for the batch)."""
        # One text split by the server: psycopg quotes a text[] parameter in Python, which
        # cost more than the rest of an apply's journal.
        text = data.decode().rstrip("\n")
        with self._mutex:
            sid = self._state_id(create=True)
            with self._errors("append to the journal"):
                cur = self._db().execute(sql.SQL(
                    "INSERT INTO {s}.journal (state_id, entry) SELECT %s, e::jsonb "
                    "FROM unnest(string_to_array(%s, E'\\n')) WITH ORDINALITY AS t(e, i) "
                    "WHERE %s::integer IS NULL OR pg_backend_pid() = %s::integer "
                    "ORDER BY i").format(s=self._s),
                    (sid, text, *(2 * [self._backend_pid if self._held is not None else None])))
            if cur.rowcount != text.count("\n") + 1:
                raise self._moved()

    def _drop_journal(self) -> None:
        if self._state_id(create=False) is not None:
            self._db().execute(sql.SQL("DELETE FROM {s}.journal WHERE state_id = %s").format(
                s=self._s), (self._id,))

    def write(self, state: State, *, force: bool = False) -> None:
        """Compare-and-swap the new version in, and empty the journal, in one transaction."""
        with self._mutex:
            sid = self._state_id(create=True)
            conn = self._db()
            with self._errors("write the state"), conn.transaction():
                row = conn.execute(sql.SQL(
                    "SELECT pg_backend_pid() FROM {s}.states WHERE id = %s FOR UPDATE").format(
                        s=self._s), (sid,)).fetchone()
                self._same_session(row[0])
                self._write(state, force)
                self._drop_journal()
            self._journal_lineage = None

    def read_backup(self) -> State | None:
        """The version that was newest before this store's first write (None: there was none)."""
        if self._backup_serial is None:
            return None
        with self._mutex, self._errors("read the state history"):
            row = self._db().execute(sql.SQL(
                "SELECT body::text FROM {s}.versions WHERE state_id = %s AND serial = %s")
                .format(s=self._s), (self._id, self._backup_serial)).fetchone()
        return None if row is None else loads(row[0].encode(), f"{self.where} serial "
                                                               f"{self._backup_serial}")

    keeps_every_version = True

    def history(self) -> list[Version]:
        """Every version written, newest first, in one query (the bodies stay on the server)."""
        with self._mutex:
            if self._state_id(create=False) is None:
                return []
            with self._errors("read the state history"):
                rows = self._db().execute(sql.SQL(
                    "SELECT serial, written_at, written_by, operation, (SELECT count(*) "
                    "FROM jsonb_object_keys(body -> 'resources')) FROM {s}.versions "
                    "WHERE state_id = %s ORDER BY serial DESC").format(s=self._s),
                    (self._id,)).fetchall()
        return [Version(int(serial), _utc(when), by, operation, int(n))
                for serial, when, by, operation, n in rows]

    def read_version(self, serial: int) -> State:
        with self._mutex:
            row = None
            if self._state_id(create=False) is not None:
                with self._errors("read the state history"):
                    row = self._db().execute(sql.SQL(
                        "SELECT body::text FROM {s}.versions WHERE state_id = %s AND "
                        "serial = %s").format(s=self._s), (self._id, serial)).fetchone()
        if row is None:
            raise StateError(f"{self.where} has no version with serial {serial} "
                             "(`state history` lists them)")
        return loads(row[0].encode(), f"{self.where} serial {serial}")

    # --- the lock ------------------------------------------------------------------

    def _holder(self) -> tuple[LockInfo | None, int | None]:
        """The holder recorded in the name's row, and its backend pid."""
        if self._state_id(create=False) is None:
            return None, None
        with self._errors("read the lock holder"):
            row = self._db().execute(sql.SQL("SELECT " + _LOCK_COLUMNS +
                                             " FROM {s}.states WHERE id = %s").format(s=self._s),
                                     (self._id,)).fetchone()
        if row is None or row[0] is None:
            return None, None
        lock_id, operation, user, host, pid, since, backend, _ = row
        return LockInfo(id=lock_id, operation=operation, who=who(user, host, pid),
                        created=_utc(since)), backend

    def _try_lock(self) -> bool:
        """pg_try_advisory_lock, only in the session this store started with."""
        with self._errors("take the state lock"):
            got, = self._db().execute(
                "SELECT CASE WHEN pg_backend_pid() = %s THEN pg_try_advisory_lock(%s::int4, "
                "%s::int4) END", (self._backend_pid, self._key1, self._id)
            ).fetchone()
        if got is None:
            raise self._moved()
        return bool(got)

    def _unlock(self) -> None:
        self._db().execute("SELECT pg_advisory_unlock(%s::int4, %s::int4)",
                           (self._key1, self._id))

    def _acquire(self, operation: str) -> tuple[object, LockInfo]:
        with self._mutex:
            self._state_id(create=True)
            take_or_wait(lambda: self._try_lock() or None, lambda: self._holder()[0], self.where,
                         self.lock_timeout, self._clock, self._sleep)
            info = LockInfo.new(operation)
            user, host, pid = identity()
            try:
                # A record naming this very session means another client shares it (a
                # pooler): the advisory lock, re-entrant per session, said yes to both.
                with self._errors("record the lock holder"):
                    recorded = self._db().execute(sql.SQL(
                        "UPDATE {s}.states SET lock_id = %s, lock_operation = %s, lock_user = %s, "
                        "lock_host = %s, lock_pid = %s, lock_since = %s, "
                        "lock_backend_pid = pg_backend_pid(), lock_backend_start = %s "
                        "WHERE id = %s AND (lock_id IS NULL OR lock_backend_pid IS DISTINCT "
                        "FROM pg_backend_pid() OR lock_backend_start IS DISTINCT FROM %s)").format(
                            s=self._s),
                        (info.id, operation, user, host, pid,
                         _dt.datetime.fromisoformat(info.created), self._backend_start, self._id,
                         self._backend_start)).rowcount
                if recorded != 1:
                    raise self._moved()
            except BaseException:
                with contextlib.suppress(psycopg.Error):
                    self._unlock()
                raise
            return info, info

    def _release(self, handle: object) -> None:
        assert isinstance(handle, LockInfo)
        with self._mutex:
            if self._conn is None or self._conn.closed:
                return  # the session is gone, and the lock with it
            try:
                self._db().execute(sql.SQL(
                    "UPDATE {s}.states SET " + ", ".join(
                        f"{c} = NULL" for c in _LOCK_COLUMNS.split(", ")) +
                    " WHERE id = %s AND lock_id = %s").format(s=self._s), (self._id, handle.id))
                self._unlock()
            except psycopg.Error as exc:  # the session is gone, and the lock with it
                log.warning("%s: could not clear the lock record (%s); it is stale and the "
                            "next locker replaces it", self.where, _reason(exc, self._secrets))

    def force_unlock(self, lock_id: str) -> LockInfo:
        """Clear the holder record `lock_id` when its session is gone; StateError when the id
        does not match or the holder's session is alive."""
        with self._mutex:
            holder, backend = self._holder()
            if holder is None:
                raise StateError(f"state {self.where} is not locked; nothing to unlock")
            if holder.id != lock_id:
                raise StateError(f"refusing to unlock: the lock on {self.where} has id "
                                 f"{holder.id}, not {lock_id}")
            if not self._try_lock():
                raise StateError(
                    f"refusing to unlock: lock {lock_id} is held by a live session ({holder.who}, "
                    f"operation {holder.operation} since {holder.created}; PostgreSQL backend "
                    f"pid {backend}); wait for it to finish, or end that session with "
                    f"pg_terminate_backend({backend})")
            self._release(holder)
            return holder


def _utc(when: _dt.datetime) -> str:
    return when.astimezone(_dt.timezone.utc).isoformat(timespec="seconds")


def _lines(rows: list[str] | None) -> bytes | None:
    return None if not rows else ("\n".join(rows) + "\n").encode()
