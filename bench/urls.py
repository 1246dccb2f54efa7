"""URLs of the benchmark server for the bare, no-op and our variants.

Every measured path resolves through one pattern, ``bench/<name>/``, to a view looked up
by name: Django's resolver tries patterns in order, so a path listed eighth cost about
180 bytecodes more to resolve than the references listed second and third, which the
instruction counts charged to the layer (bench/RESULTS_BREAKDOWN.md). The peers' servers
(:mod:`bench.urls_peers`) resolve theirs the same way.
"""

from __future__ import annotations

from django.urls import path

from bench.benchapp import floor_views, ours, views

urlpatterns = [
    path("bench/health/", views.health),
    path(
        "bench/<slug:name>/",
        views.named_views(
            {
                "bare": views.BareWrite.as_view(),
                "noop": views.Noop.as_view(),
                "db-atomic": ours.DbAtomicWrite.as_view(),
                "db-atomic-flat": ours.DbAtomicFlatWrite.as_view(),
                "db-optimistic": ours.DbOptimisticWrite.as_view(),
                "db-lease": ours.DbLeaseWrite.as_view(),
                "redis": ours.RedisWrite.as_view(),
                "db-redis-cache": ours.DbRedisCacheWrite.as_view(),
                "noop-redis": floor_views.NoopRedis.as_view(),
                "noop-sql": floor_views.NoopSql.as_view(),
                "noop-eval": floor_views.NoopEval.as_view(),
                "noop-store": floor_views.NoopStore.as_view(),
                "noop-dbstore": floor_views.NoopDbStore.as_view(),
                "bare-redis2": floor_views.BareRedis2.as_view(),
                "bare-sql4": floor_views.BareSql4.as_view(),
            }
        ),
    ),
]
