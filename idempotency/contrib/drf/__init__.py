"""Django REST framework (optional: ``pip install "/path/to/django-idempotency[drf]"``):
add ``"idempotency.contrib.drf"`` to ``INSTALLED_APPS`` and ``@idempotent`` and
``IdempotencyMiddleware`` serve DRF views (keys handled after DRF's authentication,
permissions and throttles); :class:`~idempotency.contrib.drf.mixins.IdempotentMixin`
configures a view or viewset with class attributes; :mod:`idempotency.contrib.drf.tokens`
holds the submit tokens' permission and issuing view."""
