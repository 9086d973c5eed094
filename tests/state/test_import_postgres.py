"""`import` on a PostgreSQL state, each command a separate process against `sim serve`:
one write per import (a new version in the history), refusals leave the state and its
history as they were, the lock another holder keeps is named; and the URL's password in
no output."""

from __future__ import annotations

import pytest

from tests.helpers.adoption import examples_live_without_state, post_training
from tests.helpers.postgres import PgState

pytestmark = [pytest.mark.postgres, pytest.mark.http]


@pytest.fixture
def pg(ws, pg_url):  # noqa: F811
    state = PgState(ws, pg_url)
    yield state
    state.no_password_anywhere()


def _versions(pg) -> list[int]:
    store = pg.store()
    try:
        return [v.serial for v in store.history()]
    finally:
        store.close()


def test_import_writes_one_version_and_refusals_write_none(pg, sim_server):  # noqa: F811
    wid = post_training(sim_server)
    sim_server.clear_requests()
    code, out, err = pg.run("import", "Training/7/finetune", wid)
    assert code == 0, err
    assert "Adopted Training/7/finetune" in out and pg.password not in out
    assert _versions(pg) == [1]
    store = pg.store()
    try:
        rec = store.read().resources["Training/7/finetune"]
    finally:
        store.close()
    assert rec.workload_id == wid and "imagePullPolicy" not in rec.applied["spec"]
    for args in (("Training/7/finetune", wid), ("Training/8/finetune", wid),
                 ("Training/7/x", "0b6f6a4e-0000-4000-8000-00000000dead")):
        code, _, err = pg.run("import", *args)
        assert code == 1 and err.startswith("Error: ") and len(err.strip().splitlines()) == 1
    assert _versions(pg) == [1]
    assert sim_server.writes() == []


def test_import_all_is_one_write_and_plans_clean(pg, sim_server):  # noqa: F811
    ids = examples_live_without_state(pg.ws)
    code, out, err = pg.run("import", "--all", str(pg.ws.specs))
    assert code == 0, err
    # The examples hold the organisation's resources too: counted as resources.
    assert f"Adopted {len(ids)} resources" in out
    assert _versions(pg) == [1]
    code, out, err = pg.run("plan", str(pg.ws.specs), "--detailed-exitcode")
    assert code == 0, out + err


def test_import_names_the_lock_holder(pg, sim_server):  # noqa: F811
    wid = post_training(sim_server)
    holder = pg.store()
    try:
        with holder.lock("apply"):
            code, _, err = pg.run("import", "Training/7/finetune", wid)
            assert code == 1 and "locked" in err and "apply" in err
        code, _, err = pg.run("import", "Training/7/finetune", wid)
        assert code == 0, err
    finally:
        holder.close()
