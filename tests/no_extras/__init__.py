"""The core in a project with no integration installed: no DRF, Celery, Django Ninja,
Prometheus or OpenTelemetry (.ci/run's ``core`` stream runs this package alone, in a
virtualenv of the ``core`` dependency group, with its own settings and no tests/conftest.py:
``pytest --confcutdir tests/no_extras --ds tests.no_extras.settings tests/no_extras``)."""
