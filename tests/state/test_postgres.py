"""What only the PostgreSQL store does: its tables, a row per version and per journal
entry, a lock per state name that dies with its session, the holder on record."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from reconciler.errors import StateError
from reconciler.state import State, journal
from reconciler.state.postgres import SCHEMA_VERSION, PostgresStore

from tests.helpers.postgres import missing
from tests.helpers.state import resource

pytestmark = pytest.mark.postgres


@pytest.fixture
def db(pg_url):
    with psycopg.connect(pg_url, autocommit=True) as conn:
        yield conn


def test_the_tables_are_created_on_first_use_in_the_schema_asked_for(pg_store, db):
    schema = f"rr_fresh_{uuid.uuid4().hex[:8]}"
    try:
        store = pg_store(schema=schema)
        assert store.read().resources == {}  # a plan's read on an empty database
        tables = {r[0] for r in db.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
            (schema,))}
        assert tables == {"meta", "states", "versions", "journal"}
        assert db.execute(f"SELECT value FROM {schema}.meta WHERE key = 'schema_version'"
                          ).fetchone() == (str(SCHEMA_VERSION),)
        assert db.execute(f"SELECT count(*) FROM {schema}.states").fetchone() == (0,)
    finally:
        db.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def test_a_schema_of_a_newer_layout_is_refused(pg_store, db):
    schema = f"rr_newer_{uuid.uuid4().hex[:8]}"
    try:
        pg_store(schema=schema).read()
        db.execute(f"UPDATE {schema}.meta SET value = '99' WHERE key = 'schema_version'")
        with pytest.raises(StateError, match=r"layout version 99, not one this runai-reconcile "
                                             r"knows \(up to 1\)"):
            pg_store(schema=schema).read()
    finally:
        db.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def test_every_write_is_a_new_row_naming_who_and_which_operation(pg_store, pg_schema, db):
    store = pg_store()
    state = store.read()
    state.set(resource("a"))
    store.write(state)
    with store.lock("apply"):
        state.set(resource("b"))
        store.write(state)
    rows = db.execute(
        f"SELECT v.serial, v.lineage, v.operation, v.written_by, "
        f"(SELECT count(*) FROM jsonb_object_keys(v.body->'resources')) FROM {pg_schema}.versions v "
        f"JOIN {pg_schema}.states s ON s.id = v.state_id WHERE s.name = %s ORDER BY v.serial",
        (store.name,)).fetchall()
    assert [(r[0], r[1], r[2], r[4]) for r in rows] == [(1, state.lineage, "write", 1),
                                                        (2, state.lineage, "apply", 2)]
    assert all(r[3].endswith(f" pid {os.getpid()}") for r in rows)


def test_a_read_is_one_query(pg_store):
    store = pg_store()
    state = store.read()
    state.set(resource())
    store.write(state)
    store.append([journal.close(1)], state.lineage)
    reader = pg_store()
    reader.read()  # connects and checks the schema
    conn = reader._db()
    sent: list[str] = []
    real = conn.execute
    conn.execute = lambda query, *a, **k: (sent.append(str(query)), real(query, *a, **k))[1]
    state, pending = reader.read_with_pending()
    assert len(sent) == 1 and set(state.resources) == {resource().address} and pending == []


def test_the_journal_is_a_row_per_entry_replayed_on_read_and_emptied_by_the_write(pg_store,
                                                                                  pg_schema, db):
    store = pg_store()
    state = store.read()
    a, b = resource("a"), resource("b", workload_id=None)
    store.append([journal.set_entry(a.address, a)], state.lineage)
    store.append([journal.Intent(1, "create", b.address, body=b.applied, maybe=b).to_json()],
                 state.lineage)
    count = f"SELECT count(*) FROM {pg_schema}.journal j JOIN {pg_schema}.states s ON " \
            "s.id = j.state_id WHERE s.name = %s"
    assert db.execute(count, (store.name,)).fetchone() == (3,)  # header, set, intent
    seen, pending = pg_store().read_with_pending()  # another machine, before compaction
    assert seen.lineage == state.lineage and set(seen.resources) == {a.address, b.address}
    assert [(i.seq, i.address) for i in pending] == [(1, b.address)]
    store.write(seen)
    assert db.execute(count, (store.name,)).fetchone() == (0,)
    assert not pg_store().has_journal()
    assert pg_store().read().serial == 1


def test_a_journal_of_another_lineage_is_refused(pg_store):
    store = pg_store()
    store.append([journal.close(1)], State().lineage)
    with pytest.raises(StateError, match="belongs to another state"):
        pg_store().append([journal.close(2)], State().lineage)


def test_locks_are_per_state_name_and_per_schema(pg_store, pg_schema, pg_url):
    other_schema = f"rr_other_{uuid.uuid4().hex[:8]}"
    try:
        first = pg_store(name="team-a")
        with first.lock("apply"), pg_store(name="team-b").lock("apply"):
            # the same name (and the same row id) in another schema is another lock
            with pg_store(name="team-a", schema=other_schema).lock("apply"):
                with pytest.raises(StateError, match="locked by"):
                    with pg_store(name="team-a").lock("plan"):
                        pass
    finally:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {other_schema} CASCADE")


def test_the_holder_is_on_record_for_every_client(pg_store, pg_schema, db):
    store = pg_store()
    with store.lock("state rm") as info:
        row = db.execute(
            f"SELECT lock_id, lock_operation, lock_user, lock_host, lock_pid, lock_since, "
            f"lock_backend_pid FROM {pg_schema}.states WHERE name = %s", (store.name,)).fetchone()
        assert row[0] == info.id and row[1] == "state rm"
        assert info.who == f"{row[2]}@{row[3]} pid {row[4]}"
        assert row[6] == store._backend_pid and row[5] is not None
    cleared = db.execute(f"SELECT lock_id FROM {pg_schema}.states WHERE name = %s",
                         (store.name,)).fetchone()
    assert cleared == (None,)


HOLDER = """
import sys
from reconciler.state.postgres import PostgresStore
store = PostgresStore(sys.argv[1], name=sys.argv[2], schema=sys.argv[3])
with store.lock("apply") as info:
    print(info.id, flush=True)
    sys.stdin.read()
"""


def test_a_holder_killed_with_sigkill_releases_the_lock_and_its_record_is_replaced(
        pg_store, pg_url, pg_schema):
    name = f"killed-{uuid.uuid4().hex[:8]}"
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, pg_url, name, pg_schema],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    dead_id = proc.stdout.readline().strip()
    with pytest.raises(StateError, match=f"pid {proc.pid} .*lock id {dead_id}"):
        with pg_store(name=name).lock("apply"):
            pass
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    store = pg_store(name=name)
    deadline = time.monotonic() + 10
    while True:  # the server notices the closed socket at once; allow for a busy machine
        try:
            with store.lock("apply") as info:
                holder, _ = pg_store(name=name)._holder()
                assert holder.id == info.id != dead_id  # the stale record was replaced
            break
        except StateError:
            assert time.monotonic() < deadline
            time.sleep(0.05)


def test_a_session_that_changed_under_the_lock_writes_nothing(pg_store):
    # What a pooler in transaction mode does: the next statement reaches another backend.
    store = pg_store()
    state = store.read()
    with store.lock("apply"):
        store._backend_pid = -1
        state.set(resource())
        with pytest.raises(StateError, match="session pooling"):
            store.append([journal.set_entry(resource().address, resource())], state.lineage)
        with pytest.raises(StateError, match="session pooling"):
            store.write(state)
    assert pg_store().read().resources == {} and not pg_store().has_journal()


def test_a_lost_connection_is_one_clear_error_and_the_lock_goes_with_it(pg_store, db):
    store = pg_store()
    state = store.read()
    with store.lock("apply"):
        db.execute("SELECT pg_terminate_backend(%s)", (store._backend_pid,))
        with pytest.raises(StateError, match=r"^PostgreSQL state backend \(host .*cannot write "
                                             r"the state: "):
            store.write(state)
        with pg_store().lock("apply"):  # the session died, and its lock with it
            pass


FORKER = """
import os, sys
from reconciler.state.postgres import PostgresStore
store = PostgresStore(sys.argv[1], name=sys.argv[2], schema=sys.argv[3])
with store.lock("apply") as info:
    pid = os.fork()
    if pid == 0:
        sys.exit(0)  # a forked child (a spec loader) that exits normally: finalizers run
    os.waitpid(pid, 0)
    print(info.id, flush=True)
    sys.stdin.read()
    store.write(store.read(), force=True)
print("written", flush=True)
"""


def test_a_forked_child_leaves_its_parents_session_and_lock_alone(pg_store, pg_url, pg_schema):
    name = f"fork-{uuid.uuid4().hex[:8]}"
    proc = subprocess.Popen([sys.executable, "-c", FORKER, pg_url, name, pg_schema],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    lock_id = proc.stdout.readline().strip()
    with pytest.raises(StateError, match=f"lock id {lock_id}"):  # still held after the child
        with pg_store(name=name).lock("plan"):
            pass
    out, _ = proc.communicate("go\n", timeout=30)
    assert proc.returncode == 0 and out.strip() == "written"
    assert pg_store(name=name).read().serial == 1


@pytest.fixture
def pgbouncer(pg_url):
    """`pgbouncer(mode)`: a PgBouncer in that pool mode in front of the test server; its URL."""
    exe = shutil.which("pgbouncer") or shutil.which("pgbouncer", path="/usr/sbin")
    if exe is None:
        missing("pgbouncer is not installed (Debian: apt-get install pgbouncer)")
    server = conninfo_to_dict(pg_url)
    folder = tempfile.mkdtemp(prefix="pgbouncer.")
    started: list[subprocess.Popen] = []

    def start(mode: str) -> str:
        port = free_port()
        ini = os.path.join(folder, f"{mode}.ini")
        with open(ini, "w") as f:
            f.write(f"[databases]\n* = host={server['host']} port={server['port']} "
                    f"user={server['user']} password={server.get('password', '')}\n"
                    f"[pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = {port}\n"
                    f"auth_type = trust\nauth_file = {folder}/users.txt\npool_mode = {mode}\n"
                    "unix_socket_dir =\nlogfile =\n")
        with open(os.path.join(folder, "users.txt"), "w") as f:
            f.write(f'"{server["user"]}" ""\n')
        as_user = {"user": "postgres"} if os.geteuid() == 0 else {}  # it refuses root
        if as_user:
            shutil.chown(folder, "postgres")
            for name in os.listdir(folder):
                shutil.chown(os.path.join(folder, name), "postgres")
        proc = subprocess.Popen([exe, ini], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                **as_user)
        started.append(proc)
        deadline = time.monotonic() + 10
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                break
            assert proc.poll() is None and time.monotonic() < deadline, "pgbouncer did not start"
            time.sleep(0.05)
        return f"postgresql://{server['user']}@127.0.0.1:{port}/{server['dbname']}"

    yield start
    for proc in started:
        proc.terminate()
        proc.wait(10)
    shutil.rmtree(folder, ignore_errors=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_behind_pgbouncer_in_transaction_pooling_a_second_locker_is_refused(pgbouncer, pg_store):
    # One server connection serves both clients: the advisory lock, re-entrant per session,
    # would say yes to both; the holder record, naming that very session, says no.
    url = pgbouncer("transaction")
    first, second = pg_store(url=url), pg_store(url=url)
    with first.lock("apply"):
        with pytest.raises(StateError, match=r"session pooling or a direct connection"):
            with second.lock("apply"):
                pass


def test_behind_pgbouncer_in_session_pooling_the_lock_works(pgbouncer, pg_store):
    url = pgbouncer("session")
    first, second = pg_store(url=url), pg_store(url=url)
    with first.lock("apply") as info:
        with pytest.raises(StateError, match=f"state is locked by .*lock id {info.id}"):
            with second.lock("apply"):
                pass
        state = first.read()
        state.set(resource())
        first.write(state)
    with second.lock("apply"):
        assert second.read().serial == 1
