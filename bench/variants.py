"""What is measured: the variants, their servers and the paths each one takes part in."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

FIRST, REPLAY, STORM = "first", "replay", "storm"


@dataclass(frozen=True)
class Variant:
    name: str
    description: str
    settings: str
    path: str
    kind: str  # "reference", "ours" or "peer"
    paths: tuple[str, ...]
    #: status of a replay (peers may answer a replay differently)
    replay_status: int = 201
    #: module a peer variant needs; the variant is skipped when it is not installed
    requires: str | None = None
    #: served by uvicorn (async views) instead of gunicorn
    asgi: bool = False

    @property
    def ours(self) -> bool:
        return self.kind == "ours"

    @property
    def installed(self) -> bool:
        return self.requires is None or importlib.util.find_spec(self.requires) is not None

    def expected_status(self, path: str) -> int:
        """The status of a good answer on ``path``: 201 for a first request, the variant's
        replay status for a replay."""
        return self.replay_status if path == REPLAY else 201


ALL_PATHS = (FIRST, REPLAY, STORM)

VARIANTS: tuple[Variant, ...] = (
    Variant("bare", "DRF write endpoint, token auth, no idempotency", "bench.settings",
            "/bench/bare/", "reference", (FIRST, STORM)),
    Variant("noop", "authenticated DRF no-op", "bench.settings",
            "/bench/noop/", "reference", (REPLAY,), replay_status=200),
    Variant("db-atomic", "ours: DatabaseStore, atomic mode, claim first (the default)",
            "bench.settings", "/bench/db-atomic/", "ours", ALL_PATHS),
    Variant("db-atomic-flat", "ours: db-atomic, the view leaving the transaction to the layer "
            "(no nested atomic(), so no savepoint)", "bench.settings", "/bench/db-atomic-flat/",
            "ours", (FIRST,)),
    Variant("db-optimistic", "ours: DatabaseStore, atomic mode, optimistic insert-last claim",
            "bench.settings", "/bench/db-optimistic/", "ours", ALL_PATHS),
    Variant("db-lease", "ours: DatabaseStore, lease mode", "bench.settings",
            "/bench/db-lease/", "ours", ALL_PATHS),
    Variant("redis", "ours: RedisStore (lease mode)", "bench.settings",
            "/bench/redis/", "ours", ALL_PATHS),
    Variant("db-redis-cache", "ours: DatabaseStore atomic + Redis response cache",
            "bench.settings", "/bench/db-redis-cache/", "ours", ALL_PATHS),
    Variant("django-idempotency-key", "peer 1.3.0: middleware, Redis cache storage + Redis lock",
            "bench.settings_peer_dik", "/bench/peer/", "peer", ALL_PATHS,
            replay_status=409, requires="idempotency_key"),
    Variant("drf-idempotency-db", "peer 1.0.0: middleware, DatabaseBackend",
            "bench.settings_peer_drf_db", "/bench/peer/", "peer", ALL_PATHS,
            requires="drf_idempotency"),
    Variant("drf-idempotency-redis", "peer 1.0.0: middleware, RedisBackend",
            "bench.settings_peer_drf_redis", "/bench/peer/", "peer", ALL_PATHS,
            requires="drf_idempotency"),
)  # fmt: skip


#: The ASGI stage (``python -m bench --asgi``): async views under uvicorn, each against the
#: bare async view, first requests and replays (:mod:`bench.stages`).
ASGI_VARIANTS: tuple[Variant, ...] = (
    Variant("async-bare", "bare async def view (JSON in, 201 out), no idempotency",
            "bench.settings_asgi", "/bench/async-bare/", "reference", (FIRST, REPLAY),
            asgi=True),
    Variant("async-redis", "ours: async def view, RedisStore (lease mode)",
            "bench.settings_asgi", "/bench/async-redis/", "ours", (FIRST, REPLAY), asgi=True),
    Variant("async-db-lease", "ours: async def view, DatabaseStore (lease mode)",
            "bench.settings_asgi", "/bench/async-db-lease/", "ours", (FIRST, REPLAY),
            asgi=True),
)  # fmt: skip


def reference(path: str) -> str:
    """The variant each path's ratios are taken against."""
    return "bare" if path in (FIRST, STORM) else "noop"


def rotate(items: list[Variant], by: int) -> list[Variant]:
    """``items`` starting at ``by`` (modulo their count): each round another variant first."""
    if not items:
        return items
    by %= len(items)
    return items[by:] + items[:by]
