"""Constants the test areas share: the repository's root, the cluster id of the example
specs, and the credentials `sim serve` accepts by default."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CLIENT_ID = "runai-sim"
CLIENT_SECRET = "runai-sim-secret"
CLUSTER = "71f69d83-ba66-4822-adf5-55ce55efd210"
