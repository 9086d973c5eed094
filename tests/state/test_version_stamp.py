"""`version_stamp()`, on every store: what lets `watch` skip reading an unchanged state each
cycle. It must change whenever another handle (another process) writes the state, opens
a journal intent or closes the journal, and stay put while nothing changed."""

from __future__ import annotations

from reconciler.state import journal
from reconciler.state.model import ResourceState

CLUSTER = "71f69d83-ba66-4822-adf5-55ce55efd210"


def training(name: str, image: str = "img:1") -> ResourceState:
    return ResourceState(
        kind="DistributedTraining", name=name, project_id="7", cluster_id=CLUSTER,
        workload_id=None, applied={"name": name, "projectId": "7", "clusterId": CLUSTER,
                                   "spec": {"image": image, "numWorkers": 2}},
        last_phase="Running")


def test_the_stamp_moves_with_every_write_and_journal_change_by_another_handle(open_store):
    reader, writer = open_store(), open_store()
    empty = reader.version_stamp()
    assert reader.version_stamp() == empty  # nothing changed: the same stamp

    state = writer.read()
    state.set(training("a"))
    writer.write(state)
    written = reader.version_stamp()
    assert written != empty
    assert reader.read().serial == 1

    b = training("b")
    writer.append([journal.Intent(1, "create", b.address, body=b.applied, maybe=b).to_json()],
                  state.lineage)
    opened = reader.version_stamp()
    assert opened not in (empty, written)
    assert [i.address for i in reader.read_with_pending()[1]] == [b.address]

    state.set(training("a", image="img:2"))  # a write closes the journal
    writer.write(state)
    again = reader.version_stamp()
    assert again not in (empty, written, opened)
    assert reader.read_with_pending()[1] == [] and reader.read().serial == 2
    assert reader.version_stamp() == again
