"""Replays keep the view's Vary (issue 20, item 5), merged with what outer middleware
add, so a cache in front of the API stores a replay under the same variants."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from django.test import Client, override_settings

from tests.support.drf import with_drf
from tests.support.stores import using
from tests.testapp import edge_views

OUTER = "tests.testapp.edge_views.outer_vary_middleware"


def vary(response: Any) -> set[str]:
    return {v.strip().lower() for v in response.get("Vary", "").split(",") if v.strip()}


@pytest.fixture(
    params=[
        pytest.param("idempotency.stores.database.DatabaseStore", id="database"),
        pytest.param("idempotency.stores.redis.RedisStore", id="redis", marks=pytest.mark.redis),
        pytest.param("idempotency.stores.cache.CacheStore", id="cache"),
    ]
)
def client(client_a: Client, request: pytest.FixtureRequest) -> Iterator[Client]:
    edge_views.RUNS.clear()
    store = request.param
    with override_settings(
        ROOT_URLCONF="tests.testapp.edge_urls",
        MIDDLEWARE=[OUTER, *settings.MIDDLEWARE],
        IDEMPOTENCY={**using(store), "MODE": "auto"},
    ):
        yield client_a


@pytest.mark.parametrize(
    ("url", "own"),
    with_drf(
        [("/vary/", {"accept"}), ("/async-vary/", {"accept", "accept-language"})],
        [("/api-vary/", {"accept-encoding"})],
    ),
)
def test_a_replay_keeps_the_views_vary_merged_with_the_outer_middlewares(
    client: Client, url: str, own: set[str]
) -> None:
    key = str(uuid.uuid4())
    first = client.post(url, HTTP_IDEMPOTENCY_KEY=key)
    again = client.post(url, HTTP_IDEMPOTENCY_KEY=key)
    assert first.status_code == 201
    assert again["Idempotent-Replayed"] == "true"
    assert own | {"x-outer"} <= vary(first)
    assert vary(again) == vary(first)
    assert edge_views.RUNS[url] == 1
