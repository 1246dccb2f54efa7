"""URLs of the ``retry_storm`` demo: the sample's, plus the naive pay endpoint. DEMO ONLY.

Used only by ``config/settings_demo.py``; the production ``config/urls.py`` never
routes the naive endpoint.
"""

from __future__ import annotations

from django.urls import path

from config.urls import handler404, handler500
from config.urls import urlpatterns as sample_urlpatterns
from orders.urls import OrderIdConverter  # noqa: F401  (registers the order_id converter)
from payments.demo import NaiveOrderPayApi

urlpatterns = [
    path("demo/naive/orders/<order_id:pk>/pay/", NaiveOrderPayApi.as_view(), name="naive-pay"),
    *sample_urlpatterns,
]

__all__ = ["handler404", "handler500", "urlpatterns"]
