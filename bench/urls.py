"""URLs of the benchmark server for the bare, no-op and our variants."""

from __future__ import annotations

from django.urls import path

from bench.benchapp import floor_views, ours, views

urlpatterns = [
    path("bench/health/", views.health),
    path("bench/bare/", views.BareWrite.as_view()),
    path("bench/noop/", views.Noop.as_view()),
    path("bench/db-atomic/", ours.DbAtomicWrite.as_view()),
    path("bench/db-atomic-flat/", ours.DbAtomicFlatWrite.as_view()),
    path("bench/db-optimistic/", ours.DbOptimisticWrite.as_view()),
    path("bench/db-lease/", ours.DbLeaseWrite.as_view()),
    path("bench/redis/", ours.RedisWrite.as_view()),
    path("bench/db-redis-cache/", ours.DbRedisCacheWrite.as_view()),
    path("bench/noop-redis/", floor_views.NoopRedis.as_view()),
    path("bench/noop-sql/", floor_views.NoopSql.as_view()),
    path("bench/noop-eval/", floor_views.NoopEval.as_view()),
    path("bench/noop-store/", floor_views.NoopStore.as_view()),
    path("bench/noop-dbstore/", floor_views.NoopDbStore.as_view()),
    path("bench/bare-redis2/", floor_views.BareRedis2.as_view()),
    path("bench/bare-sql4/", floor_views.BareSql4.as_view()),
]
