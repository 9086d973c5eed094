"""`runai-reconcile watch`: the engine run as a long-lived controller.

`status` is the contract between the loop (which makes one `Snapshot` per cycle) and
what publishes it (the HTTP endpoint: /metrics, /healthz, /readyz, /api/status, the
status page; and the alerts). The loop writes snapshots to a `StatusBoard`; publishers
only read it.
"""
