"""The sample project as an app, so its deployment checks are registered at start-up."""

from __future__ import annotations

from django.apps import AppConfig


class SampleProjectConfig(AppConfig):
    name = "config"
    label = "sample_project"
    verbose_name = "Sample project"

    def ready(self) -> None:
        from config import checks  # noqa: F401 - registers the deployment checks
