"""URLs of a peer library's server: the bare view, which the peer's middleware wraps."""

from __future__ import annotations

from django.urls import path

from bench.benchapp import views

urlpatterns = [
    path("bench/health/", views.health),
    path("bench/peer/", views.BareWrite.as_view()),
]
