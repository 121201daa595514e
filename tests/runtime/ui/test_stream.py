"""The change feed: the world once, then only what changed; versions survive a
reconnect, another feed's (or a malformed) id gets the world again."""

from __future__ import annotations

import asyncio
import json

from gpumosaic.runtime.ui.stream import PATCHES_KEPT, Feed, bearer_ok, diff, stream


def events(data: bytes) -> list[tuple[str, str, dict]]:
    out = []
    for block in data.decode().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "data" in fields:
            out.append((fields["event"], fields["id"], json.loads(fields["data"])))
    return out


def test_diff_sets_changed_keys_and_deletes_gone_ones() -> None:
    old = {"jobs": {"1": {"state": "queued"}, "2": {"state": "running"}}, "gone": {"x": 1}}
    new = {"jobs": {"1": {"state": "running"}, "2": {"state": "running"}, "3": {}}}
    changed, deleted = diff(old, new)
    assert changed == {"jobs": {"1": {"state": "running"}, "3": {}}}
    assert deleted == {"gone": ["x"]}
    assert diff(new, new) == ({}, {})


def test_feed_sends_the_world_then_patches_and_nothing_when_unchanged() -> None:
    world = {"jobs": {"1": [0.0]}}
    feed = Feed(lambda: json.loads(json.dumps(world)), interval_s=0.0)
    v1 = feed.refresh()
    data, at = feed.since(0)
    ((kind, event_id, body),) = events(data)
    assert (kind, body, at) == ("world", world, v1)
    assert feed.client_version(event_id) == v1
    world["jobs"]["1"] = [5.0]
    world["jobs"]["2"] = [0.0]
    v2 = feed.refresh()
    data, at = feed.since(v1)
    ((kind, _, body),) = events(data)
    assert kind == "patch" and at == v2 == v1 + 1
    assert body["set"] == {"jobs": {"1": [5.0], "2": [0.0]}} and body["del"] == {}
    assert feed.refresh() == v2  # nothing changed: no new version
    assert feed.since(v2) == (b"", v2)


def test_unknown_feeds_and_old_versions_get_the_world() -> None:
    n = [0]

    def source() -> dict:
        n[0] += 1
        return {"n": {"v": n[0]}}

    feed = Feed(source, interval_s=0.0)
    for _ in range(PATCHES_KEPT + 3):
        feed.refresh()
    assert events(feed.since(1)[0])[0][0] == "world"  # its patches are gone
    assert events(feed.since(feed.version - 2)[0])[0][0] == "patch"
    for other in ("", "abc", "ffffffff-3", f"{feed.name}-x", f"{feed.name}-{10**20}"):
        assert feed.client_version(other) == 0


def test_refresh_is_shared_by_every_client_within_the_interval() -> None:
    calls = [0]

    def source() -> dict:
        calls[0] += 1
        return {"s": {"calls": calls[0]}}

    feed = Feed(source, interval_s=60.0)
    for _ in range(10):
        feed.refresh()
    assert calls[0] == 1


def test_stream_ends_after_its_lifetime_and_when_the_client_is_gone() -> None:
    feed = Feed(lambda: {"s": {"a": 1}}, interval_s=0.01)

    async def refresh() -> int:
        return feed.refresh()

    async def collect(**kw: object) -> bytes:
        out = b""
        async for chunk in stream(feed, 0, refresh, asyncio.sleep, **kw):  # type: ignore[arg-type]
            out += chunk
        return out

    data = asyncio.run(collect(lifetime_s=0.05))
    assert [e[0] for e in events(data)] == ["world"]

    async def gone() -> bool:
        return True

    assert asyncio.run(collect(gone=gone, lifetime_s=60.0)).count(b"event:") == 1


def test_bearer_token_rule_is_the_apis() -> None:
    assert bearer_ok("", "") and bearer_ok("t", "Bearer t")
    assert not bearer_ok("t", "") and not bearer_ok("t", "Bearer u") and not bearer_ok("t", "t")
