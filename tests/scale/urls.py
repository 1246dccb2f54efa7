from __future__ import annotations

from django.urls import path

from tests.scale import views

urlpatterns = [path("charge/", views.charge)]
