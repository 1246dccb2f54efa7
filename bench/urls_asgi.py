"""URLs of the ASGI benchmark server: async views, bare and under ``@idempotent``."""

from __future__ import annotations

from django.urls import path

from bench.benchapp import async_views, views

urlpatterns = [
    path("bench/health/", views.health),
    path("bench/async-bare/", async_views.bare),
    path("bench/async-redis/", async_views.redis),
    path("bench/async-db-lease/", async_views.db_lease),
]
