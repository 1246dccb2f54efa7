"""URLs of the benchmark server for the bare, no-op and our variants."""

from __future__ import annotations

from django.urls import path

from bench.benchapp import ours, views

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
]
