"""The notifier against a real receiver on loopback: one POST per transition, none for
an unchanged cycle, a 500 retried into one delivery, a dead receiver never blocking
observe(), a webhook's secret path never logged."""

from __future__ import annotations

import logging
import time

import pytest

from reconciler import errors
from reconciler.watch import notify
from reconciler.watch import status as st
from tests.helpers import receiver as rx
from tests.helpers import snapshots as b

JOB = "Training/7/job-1"


def _fleet_drifting():
    first = b.next_cycle(b.snapshot())
    drifted = b.next_cycle(first, workloads=b.changed(first, JOB, sync=st.DRIFTED,
                                                       reason="spec.image changed outside"))
    return first, drifted


def test_one_post_per_transition_and_none_for_an_unchanged_cycle():
    first, drifted = _fleet_drifting()
    with rx.Receiver() as receiver:
        notifier = notify.Notifier([receiver.url], backoff_s=0.05)
        assert notifier.observe(first) == []
        assert [e.event for e in notifier.observe(drifted)] == ["drifted"]
        assert notifier.observe(b.next_cycle(drifted)) == []
        assert notifier.close(timeout=5) == 0
    assert len(receiver.bodies) == 1
    [body] = receiver.bodies
    assert body["event"] == "drifted" and body["workload"]["address"] == JOB
    assert JOB in body["text"] and body["source"] == "runai-reconcile watch"
    assert receiver.paths == ["/hooks/T0/B0/token-xyz"]


def test_every_url_gets_each_event():
    first, drifted = _fleet_drifting()
    with rx.Receiver() as one, rx.Receiver() as two:
        notifier = notify.Notifier([one.url, two.url, one.url])
        notifier.observe(first)
        notifier.observe(drifted)
        notifier.close(timeout=5)
    assert len(one.bodies) == 1 and len(two.bodies) == 1


def test_a_receiver_answering_500_then_200_gets_the_event_once():
    first, drifted = _fleet_drifting()
    with rx.Receiver(statuses=(500, 200)) as receiver:
        notifier = notify.Notifier([receiver.url], backoff_s=0.05)
        notifier.observe(first)
        notifier.observe(drifted)
        delivered = receiver.wait_for(1)
        assert notifier.close(timeout=5) == 0
    assert len(receiver.bodies) == 2  # the 500, then the retry
    assert len(delivered) == 1 and delivered[0]["event"] == "drifted"
    assert notifier.delivered == 1


def test_a_receiver_refusing_with_a_4xx_is_not_retried():
    first, drifted = _fleet_drifting()
    with rx.Receiver(statuses=(400,)) as receiver:
        notifier = notify.Notifier([receiver.url], backoff_s=0.05)
        notifier.observe(first)
        notifier.observe(drifted)
        assert notifier.close(timeout=5) == 1
    assert len(receiver.bodies) == 1


def test_retries_stop_at_the_cap():
    first, drifted = _fleet_drifting()
    with rx.Receiver(statuses=(503,)) as receiver:
        notifier = notify.Notifier([receiver.url], backoff_s=0.01, attempts=3)
        notifier.observe(first)
        notifier.observe(drifted)
        deadline = time.monotonic() + 5
        while notifier.undelivered and len(receiver.bodies) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert notifier.close(timeout=5) == 1
    assert len(receiver.bodies) == 3


def test_a_dead_receiver_never_blocks_observe_and_close_is_brief(caplog):
    caplog.set_level(logging.INFO, logger="reconciler.watch.notify")
    first, drifted = _fleet_drifting()
    with rx.hanging() as url:
        notifier = notify.Notifier([url, rx.dead_url()], timeout_s=30, backoff_s=0.05)
        notifier.observe(first)
        told = 0
        started = time.monotonic()
        for n in range(20):  # twenty cycles, each with a change to tell
            drifted = b.next_cycle(drifted, workloads=b.changed(
                drifted, JOB, reason=f"change {n}", sync=st.SYNCED if n % 2 else st.DRIFTED))
            told += len(notifier.observe(drifted))
        observing = time.monotonic() - started
        started = time.monotonic()
        left = notifier.close(timeout=0.5)
        closing = time.monotonic() - started
    assert observing < 1.0, f"observe() took {observing:.2f} s for 20 snapshots"
    assert closing < 3.0, f"close(0.5) took {closing:.2f} s"
    assert told == 20
    assert left == 40  # 20 events to each of two receivers, none delivered
    text = caplog.text
    assert "hidden-token" not in text and "dead-token" not in text and "/hooks" not in text
    assert "http://127.0.0.1:" in text  # the receiver named by scheme and host


def test_the_queue_is_bounded():
    first, drifted = _fleet_drifting()
    with rx.hanging() as url:
        notifier = notify.Notifier([url], timeout_s=30, queue_size=3)
        notifier.observe(first)
        for n in range(10):
            drifted = b.next_cycle(drifted, workloads=b.changed(
                drifted, JOB, sync=st.SYNCED if n % 2 else st.DRIFTED))
            assert len(notifier.observe(drifted)) == 1
        sender = notifier._senders[0]
        assert sender.pending <= 4 and sender.dropped >= 6
        assert notifier.close(timeout=0.2) == 10


def test_redact_applies_to_every_string_sent():
    first = b.next_cycle(b.snapshot())
    drifted = b.next_cycle(first, workloads=b.changed(first, JOB, sync=st.DRIFTED,
                                                       reason="value hunter2 seen"))
    with rx.Receiver() as receiver:
        notifier = notify.Notifier([receiver.url],
                                   redact=lambda s: s.replace("hunter2", "(sensitive)"))
        notifier.observe(first)
        notifier.observe(drifted)
        notifier.close(timeout=5)
    [body] = receiver.bodies
    assert "hunter2" not in str(body) and "(sensitive)" in body["workload"]["reason"]


@pytest.mark.parametrize("url", ["ftp://example.com/x", "not a url", "http://"])
def test_a_notify_url_that_cannot_be_posted_to_is_one_clear_error(url):
    with pytest.raises(errors.ReconcileError, match="--notify .*http:// or https://"):
        notify.Notifier([url])


def test_a_notify_url_with_credentials_is_refused_without_showing_them():
    with pytest.raises(errors.ReconcileError) as caught:
        notify.Notifier(["https://user:pa55@hooks.example.com/services/T/B/secret"])
    assert "pa55" not in str(caught.value) and "secret" not in str(caught.value)
    assert "https://hooks.example.com/…" in str(caught.value)
