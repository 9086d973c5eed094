"""`open_store`, the factory behind `--state`: a path, a PostgreSQL URL, or a clear error."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from reconciler.errors import StateError
from reconciler.state import LocalFileStore, open_store


def test_a_path_is_the_local_file_store(tmp_path):
    store = open_store(str(tmp_path / "state.json"), lock_timeout=3)
    assert isinstance(store, LocalFileStore)
    assert store.path == tmp_path / "state.json" and store.lock_timeout == 3


def test_a_state_name_needs_a_postgresql_state(tmp_path):
    with pytest.raises(StateError, match="--state-name selects a state in a PostgreSQL --state"):
        open_store(str(tmp_path / "state.json"), name="staging")


def test_an_unknown_scheme_is_refused_without_echoing_the_url():
    with pytest.raises(StateError, match=r"unknown backend s3://") as err:
        open_store("s3://user:hunter2@bucket/state.json")
    assert "hunter2" not in str(err.value)


@pytest.mark.parametrize("scheme", ["postgresql", "postgres"])
def test_both_postgresql_schemes_open_the_postgresql_store_without_connecting(scheme):
    from reconciler.state.postgres import PostgresStore

    store = open_store(f"{scheme}://ops:hunter2@db.example:6543/infra", name="team-a")
    assert isinstance(store, PostgresStore)
    assert store.where == "postgresql://ops@db.example:6543/infra (schema runai_reconcile, state 'team-a')"
    assert "hunter2" not in store.where


def test_libpq_environment_fills_in_what_the_url_leaves_out(monkeypatch):
    monkeypatch.setenv("PGHOST", "pg.internal")
    monkeypatch.setenv("PGUSER", "ci")
    monkeypatch.setenv("PGDATABASE", "states")
    store = open_store("postgresql://")
    assert store.where.startswith("postgresql://ci@pg.internal:5432/states ")


@pytest.mark.parametrize("bad", [{"name": ""}, {"name": "a\nb"}, {"schema": "Robert'); DROP"}])
def test_a_bad_state_name_or_schema_is_one_clear_error(bad):
    with pytest.raises(StateError, match="state-name|state schema"):
        open_store("postgresql://localhost/db", **bad)


def test_a_postgresql_url_without_psycopg_installed_is_one_clear_line(tmp_path):
    code = ("import sys; sys.modules['psycopg'] = None\n"
            "from reconciler.cli import entry; entry()")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNAI_")}
    proc = subprocess.run(
        [sys.executable, "-c", code, "--state", "postgresql://u:hunter2@localhost/db",
         "state", "list"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert proc.returncode == 1
    assert proc.stderr.strip() == ("Error: a PostgreSQL --state needs psycopg: pip install "
                                   "'runai-reconcile[postgres]'")
    assert "hunter2" not in proc.stdout + proc.stderr
