"""The simulator's CPU for listing a large fleet, and for the writes that keep it listed.

Callers: run by hand when changing reconciler/simulator's listing or store
(`python benchmarks/simlist.py --n 10000`). In process (httpx's ASGI transport, no
sockets): N creates spread over P projects, then every workload listed in pages of 500
(no filter), then one project's workloads listed in pages of 500 (`projectId==X`), the
same with `clusterId==Y` too (as a refresh lists them), then
N/10 suspends, N/10 creates and N/10 deletes (the list's order built by then). Prints this process's CPU seconds for each step
(`time.process_time`), so the figure is the simulator's work plus the in-process
client's, the same for the code before and after a change.
"""

from __future__ import annotations

import argparse
import asyncio
import time

import httpx

from reconciler.simulator import DEFAULT_CLIENT_ID, DEFAULT_CLIENT_SECRET, create_app

CLUSTER = "71f69d83-ba66-4822-adf5-55ce55efd210"
DISTRIBUTED = "/api/v1/workloads/distributed"


async def run(n: int, projects: int) -> list[tuple[str, int, float]]:
    app = create_app(seed=1)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://sim") as client:
        token = (await client.post("/api/v1/token", json={
            "grantType": "client_credentials", "clientID": DEFAULT_CLIENT_ID,
            "clientSecret": DEFAULT_CLIENT_SECRET})).json()["accessToken"]
        client.headers["Authorization"] = f"Bearer {token}"
        out = []

        def step(name: str, count: int, started: float) -> None:
            out.append((name, count, time.process_time() - started))

        started = time.process_time()
        ids = []
        for i in range(n):
            r = await client.post(DISTRIBUTED, json={
                "name": f"w{i}", "projectId": str(i % projects), "clusterId": CLUSTER,
                "spec": {"image": "nvcr.io/nvidia/pytorch:24.05-py3",
                         "distributedFramework": "PyTorch", "numWorkers": 2}})
            assert r.status_code == 202, r.text
            ids.append(r.json()["workloadId"])
        step("create", n, started)

        async def list_all(params: dict) -> int:
            seen, offset, requests = 0, 0, 0
            while True:
                r = await client.get("/api/v1/workloads",
                                     params={**params, "limit": 500, "offset": offset})
                requests += 1
                body = r.json()
                seen += len(body["workloads"])
                if "next" not in body:
                    return requests
                offset = body["next"]

        started = time.process_time()
        step(f"list all {n} in pages of 500", await list_all({}), started)
        started = time.process_time()
        step(f"list project 0 ({n // projects}) in pages of 500",
             await list_all({"filterBy": "projectId==0"}), started)

        started = time.process_time()
        step(f"list project 0 in cluster ({n // projects}), as a refresh lists",
             await list_all({"filterBy": f"projectId==0,clusterId=={CLUSTER}"}), started)

        started = time.process_time()
        for wid in ids[: n // 10]:
            await client.post(f"{DISTRIBUTED}/{wid}/suspend")
        step("suspend", n // 10, started)
        started = time.process_time()
        for i in range(n // 10):  # the list's order is built by now: kept on each insert
            r = await client.post(DISTRIBUTED, json={
                "name": f"x{i}", "projectId": str(i % projects), "clusterId": CLUSTER,
                "spec": {"image": "nvcr.io/nvidia/pytorch:24.05-py3",
                         "distributedFramework": "PyTorch", "numWorkers": 2}})
            assert r.status_code == 202, r.text
        step("create after listing", n // 10, started)
        started = time.process_time()
        for wid in ids[-(n // 10):]:
            await client.delete(f"{DISTRIBUTED}/{wid}")
        step("delete after listing", n // 10, started)
        return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--projects", type=int, default=20)
    args = parser.parse_args()
    for name, count, cpu in asyncio.run(run(args.n, args.projects)):
        print(f"{name:<40} {count:>6} requests  {cpu:7.3f} CPU-s  "
              f"{1000 * cpu / max(count, 1):7.3f} ms each")


if __name__ == "__main__":
    main()
