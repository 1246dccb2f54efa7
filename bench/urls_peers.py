"""URLs of a peer library's server: the bare view, which the peer's middleware wraps,
resolved as :mod:`bench.urls` resolves ours (one ``bench/<name>/`` pattern)."""

from __future__ import annotations

from django.urls import path

from bench.benchapp import views

urlpatterns = [
    path("bench/health/", views.health),
    path("bench/<slug:name>/", views.named_views({"peer": views.BareWrite.as_view()})),
]
