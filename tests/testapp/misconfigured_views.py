"""Views that name stores of their own, for the checks that walk the URL patterns and
for the answer a misconfigured store gets at run time. Each URLconf is a class with
``urlpatterns`` (``ROOT_URLCONF`` takes the object itself)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import path
from ninja import NinjaAPI
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from idempotency import idempotent
from idempotency.contrib.drf.mixins import IdempotentMixin
from idempotency.stores.cache import CacheStore
from idempotency.stores.redis import RedisStore

#: Labels of the view bodies that ran (none may run while the store is misconfigured).
RAN: list[str] = []


@idempotent(store=RedisStore())
def redis_function(request: HttpRequest) -> HttpResponse:
    RAN.append(request.path)
    return JsonResponse({"ran": True}, status=201)


@idempotent(store=RedisStore(), mode="lease")
async def redis_async(request: HttpRequest) -> HttpResponse:
    RAN.append(request.path)
    return JsonResponse({"ran": True}, status=201)


class RedisMixinView(IdempotentMixin, APIView):
    idempotency_store = RedisStore()

    def post(self, request: Request) -> Response:
        RAN.append(request.path)
        return Response({"ran": True}, status=201)


@idempotent(store=CacheStore(cache="records"))
def cache_function(request: HttpRequest) -> HttpResponse:
    RAN.append(request.path)
    return JsonResponse({"ran": True}, status=201)


@idempotent(store=RedisStore(), mode="atomic")
def atomic_redis(request: HttpRequest) -> HttpResponse:
    RAN.append(request.path)
    return JsonResponse({"ran": True}, status=201)


@idempotent(store="no-such-store")
def not_a_store(request: HttpRequest) -> HttpResponse:
    return JsonResponse({"ran": True}, status=201)


ninja_api = NinjaAPI(urls_namespace="misconfigured-ninja")


@ninja_api.post("/not-a-store/", url_name="ninja-not-a-store")
@idempotent(store="no-such-store")
def ninja_not_a_store(request: HttpRequest) -> dict[str, bool]:
    return {"ran": True}


class RedisViews:
    urlpatterns = [
        path("redis/", redis_function, name="redis-function"),
        path("redis-async/", redis_async, name="redis-async"),
        path("redis-mixin/", RedisMixinView.as_view(), name="redis-mixin"),
    ]


class CacheViews:
    urlpatterns = [path("cache/", cache_function, name="cache-function")]


class AtomicViews:
    urlpatterns = [path("atomic/", atomic_redis, name="atomic-redis")]


class NotAStoreViews:
    urlpatterns = [path("not-a-store/", not_a_store, name="not-a-store")]


class NinjaNotAStoreViews:
    urlpatterns = [path("api/", ninja_api.urls)]
