"""`live.workloads.list_scopes`, the list-first refresh's paging: every page a scope is
expected to need goes out at once, a scope larger than expected asks for more until the
API says it is done, and each scope's filter names its project and cluster."""

from __future__ import annotations

import asyncio

from reconciler.live import workloads


class Pages:
    """A reader answering list pages from `sizes` (scope -> item count) as the API pages
    them (500 a page, `next` while more follow), recording each call and how many were in
    flight at once."""

    def __init__(self, sizes: dict[tuple[str, str], int]):
        self.sizes = sizes
        self.calls: list[tuple[tuple[str, ...], int]] = []
        self.in_flight = self.most = 0

    async def list_page(self, filter_by, offset):
        self.calls.append((tuple(filter_by), offset))
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        await asyncio.sleep(0.01)
        self.in_flight -= 1
        project = filter_by[0].split("==")[1]
        cluster = filter_by[1].split("==")[1]
        n = self.sizes[(project, cluster)]
        items = [{"id": f"{project}-{i}", "projectId": project}
                 for i in range(offset, min(n, offset + 500))]
        page = {"workloads": items}
        if offset + 500 < n:
            page["next"] = offset + 500
        return page


def test_the_expected_pages_of_every_scope_go_out_at_once():
    reader = Pages({("1", "c"): 1200, ("2", "c"): 10})
    got = asyncio.run(workloads.list_scopes(reader, {("1", "c"): 1200, ("2", "c"): 10}))
    assert len(got[("1", "c")]) == 1200 and len(got[("2", "c")]) == 10
    assert len({i["id"] for i in got[("1", "c")]}) == 1200
    assert sorted(o for f, o in reader.calls if f[0] == "projectId==1") == [0, 500, 1000]
    assert reader.most == 4  # three pages of project 1 and project 2's one, together
    assert ("projectId==2", "clusterId==c") in {f for f, _ in reader.calls}


def test_a_scope_larger_than_expected_asks_until_the_api_says_it_is_done():
    reader = Pages({("1", "c"): 1700})
    got = asyncio.run(workloads.list_scopes(reader, {("1", "c"): 900}))
    assert len(got[("1", "c")]) == 1700
    assert [o for _, o in reader.calls] == [0, 500, 1000, 1500]


def test_a_full_last_page_without_next_is_the_end_only_when_the_api_says_so():
    assert workloads._more({"workloads": [{}] * 500}, 0)  # no `next` at all: full means more
    assert not workloads._more({"workloads": [{}] * 500, "next": None}, 0)
    assert not workloads._more({"workloads": [{}] * 10}, 0)
    # ... unless the items expected are in: 500 workloads expected, 500 listed, no `next`
    assert not workloads._more({"workloads": [{}] * 500}, 0, as_expected=True)


def test_a_scope_of_exactly_one_full_page_costs_one_request():
    reader = Pages({("1", "c"): 500})
    got = asyncio.run(workloads.list_scopes(reader, {("1", "c"): 500}))
    assert len(got[("1", "c")]) == 500 and [o for _, o in reader.calls] == [0]


def test_each_page_is_cut_as_it_arrives_not_once_every_page_is_in():
    """With `cut`, a page's items are cut when that page is answered: the pages of a
    scope, all in flight together, are never all held whole."""
    events = []

    class Slow(Pages):
        async def list_page(self, filter_by, offset):
            await asyncio.sleep(0.01 * offset / 500)  # later pages answer later
            page = await super().list_page(filter_by, offset)
            events.append(("answered", offset))
            return page

    def cut(item):
        events.append(("cut", int(item["id"].split("-")[1]) // 500 * 500))
        return {"id": item["id"]}

    reader = Slow({("1", "c"): 1700})
    got = asyncio.run(workloads.list_scopes(reader, {("1", "c"): 1200}, cut=cut))
    assert got[("1", "c")] == [{"id": f"1-{i}"} for i in range(1700)]
    assert events.index(("cut", 0)) < events.index(("answered", 1000))
