"""The retry policy's pure parts: Retry-After parsing, backoff bounds, ambiguity."""

from __future__ import annotations

import email.utils
import random

import httpx
import pytest

from reconciler.api import retries


@pytest.mark.parametrize("value, expected", [
    ("3", 3.0), (" 1.5 ", 1.5), ("-4", 0.0), ("", None), (None, None), ("soon", None),
])
def test_retry_after_seconds(value, expected):
    assert retries.retry_after(value, now=0.0) == expected


def test_retry_after_http_date_is_relative_to_now():
    now = 1_800_000_000.0
    header = email.utils.formatdate(now + 30, usegmt=True)
    assert retries.retry_after(header, now=now) == pytest.approx(30.0)
    assert retries.retry_after(email.utils.formatdate(now - 30, usegmt=True), now=now) == 0.0


def test_backoff_is_capped():
    rng = random.Random(1)
    delays = [retries.backoff(30, rng) for _ in range(200)]
    assert max(delays) <= retries.MAX_DELAY_S and min(delays) >= 0.0


def test_which_failures_leave_a_write_ambiguous():
    assert [s for s in sorted(retries.RETRY_STATUSES) if retries.is_ambiguous_status(s)] == [500, 502, 504]
    assert not retries.is_ambiguous_transport(httpx.ConnectError("refused"))
    assert not retries.is_ambiguous_transport(httpx.ConnectTimeout("slow connect"))
    assert retries.is_ambiguous_transport(httpx.ReadTimeout("slow"))
    assert retries.is_ambiguous_transport(httpx.RemoteProtocolError("dropped"))
