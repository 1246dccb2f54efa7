"""Pluggable parts chosen by dotted path, class or instance (idempotency.core.backends): a third
party's token and lock backends, the built-in ones by alias, and what a bad value gives."""

from __future__ import annotations

import time
from io import StringIO
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

from idempotency import Lock, consume_submit_token, issue_submit_token, lock
from idempotency.checks import check_settings
from idempotency.exceptions import LockNotAcquired, SubmitTokenInvalid, SubmitTokenUsed
from idempotency.locks import (
    LOCK_BACKENDS,
    MySQLLockBackend,
    PostgresLockBackend,
    RedisLockBackend,
    get_backend,
)
from idempotency.stores import STORES, DatabaseStore, get_store
from idempotency.tokens import TOKEN_BACKENDS, DatabaseTokens, RedisTokens, get_token_backend
from idempotency.tokens.base import hash_token
from tests.support.counting import unique
from tests.support.storms import run_threads
from tests.testapp.backends import MemoryTokens, ThreadLocks


def checked(**idempotency: Any) -> list[Any]:
    """What the checks say of ``idempotency`` (one database: W006 stays out)."""
    one = {"default": django_settings.DATABASES["default"]}
    with override_settings(IDEMPOTENCY=idempotency, DATABASES=one):
        return check_settings()


MEMORY_TOKENS = "tests.testapp.backends.MemoryTokens"
THREAD_LOCKS = "tests.testapp.backends.ThreadLocks"


# -- a third party's backends, by dotted path -----------------------------------------------


def test_a_token_backend_named_by_dotted_path_keeps_the_tokens() -> None:
    with override_settings(IDEMPOTENCY={"SUBMIT_TOKEN_BACKEND": MEMORY_TOKENS}):
        backend = get_token_backend()
        assert type(backend) is MemoryTokens
        token = issue_submit_token(user_or_scope="tenant:1", purpose="form")
        assert list(backend.tokens) == [hash_token(token)]
        with pytest.raises(SubmitTokenInvalid):
            consume_submit_token(token=token, user_or_scope="tenant:2", purpose="form")
        consume_submit_token(token=token, user_or_scope="tenant:1", purpose="form")
        with pytest.raises(SubmitTokenUsed):
            consume_submit_token(token=token, user_or_scope="tenant:1", purpose="form")
        assert backend.tokens[hash_token(token)][3] is True


def test_a_lock_backend_named_by_dotted_path_takes_the_locks() -> None:
    with override_settings(IDEMPOTENCY={"LOCK_BACKEND": THREAD_LOCKS}):
        backend = get_backend()
        assert type(backend) is ThreadLocks
        with lock("ledger", timeout=5):
            assert backend.taken == ["ledger"]
            with pytest.raises(LockNotAcquired), lock("ledger", wait=0):
                pass
        with lock("ledger", timeout=5):
            assert backend.taken == ["ledger", "ledger"]


def test_a_class_or_an_instance_is_taken_too() -> None:
    mine = ThreadLocks()
    with override_settings(IDEMPOTENCY={"LOCK_BACKEND": mine}):
        assert get_backend() is mine
    assert get_backend(mine) is mine
    with override_settings(IDEMPOTENCY={"SUBMIT_TOKEN_BACKEND": MemoryTokens}):
        assert type(get_token_backend()) is MemoryTokens
    assert type(get_backend(ThreadLocks)) is ThreadLocks


def test_one_instance_per_path_until_the_settings_change() -> None:
    with override_settings(IDEMPOTENCY={"LOCK_BACKEND": THREAD_LOCKS}):
        first = get_backend()
        assert get_backend() is first
        assert get_backend(THREAD_LOCKS) is first
        assert get_backend(ThreadLocks) is first  # a class is its dotted path
    with override_settings(IDEMPOTENCY={"LOCK_BACKEND": THREAD_LOCKS}):
        assert get_backend() is not first


def test_stores_tokens_and_locks_share_one_resolver() -> None:
    assert type(STORES) is type(TOKEN_BACKENDS) is type(LOCK_BACKENDS)
    assert type(get_store("idempotency.stores.DatabaseStore")) is DatabaseStore
    with pytest.raises(ImproperlyConfigured, match="is not a subclass of .*BaseStore"):
        get_store("collections.OrderedDict")


# -- the old short names are aliases --------------------------------------------------------


@pytest.mark.parametrize(
    ("alias", "cls"),
    [
        ("redis", RedisLockBackend),
        ("postgres", PostgresLockBackend),
        ("postgresql", PostgresLockBackend),
        ("mysql", MySQLLockBackend),
        ("mariadb", MySQLLockBackend),
    ],
)
def test_lock_aliases(alias: str, cls: type) -> None:
    assert type(get_backend(alias)) is cls
    with override_settings(IDEMPOTENCY={"LOCK_BACKEND": alias}):
        assert get_backend() is get_backend(alias)
    assert [m.id for m in checked(LOCK_BACKEND=alias)] in ([], ["idempotency.E007"])


@pytest.mark.parametrize(("alias", "cls"), [("database", DatabaseTokens), ("redis", RedisTokens)])
def test_token_aliases(alias: str, cls: type) -> None:
    with override_settings(IDEMPOTENCY={"SUBMIT_TOKEN_BACKEND": alias}):
        assert type(get_token_backend()) is cls


def test_the_defaults_are_the_dotted_paths_of_the_former_defaults() -> None:
    with override_settings(IDEMPOTENCY={}):
        assert type(get_backend()) is RedisLockBackend
        assert type(get_token_backend()) is DatabaseTokens


# -- bad values: a check at startup, ImproperlyConfigured at use ------------------------------

BAD = [
    pytest.param("zookeeper", "E044", "cannot be imported", id="not-a-path"),
    pytest.param("tests.testapp.backends.Nothing", "E044", "cannot be imported", id="missing"),
    pytest.param("collections.OrderedDict", "E045", "is not a subclass of", id="wrong-base"),
    pytest.param(THREAD_LOCKS, "E045", "is not a subclass of", id="the-other-base"),
    pytest.param(1, "E045", "int is not a subclass of", id="a-number"),
    pytest.param(
        "tests.testapp.backends.HalfTokens", "E046", "does not implement consume", id="abstract"
    ),
]


@pytest.mark.parametrize(("value", "code", "words"), BAD)
def test_bad_token_backend(value: Any, code: str, words: str) -> None:
    (message,) = checked(SUBMIT_TOKEN_BACKEND=value)
    assert message.id == f"idempotency.{code}"
    assert words in message.msg
    assert f"IDEMPOTENCY['SUBMIT_TOKEN_BACKEND'] = {value!r}" in message.msg
    with (
        override_settings(IDEMPOTENCY={"SUBMIT_TOKEN_BACKEND": value}),
        pytest.raises(ImproperlyConfigured, match=words) as raised,
    ):
        issue_submit_token(user_or_scope="tenant:1", purpose="form")
    assert f"IDEMPOTENCY['SUBMIT_TOKEN_BACKEND'] = {value!r}" in str(raised.value)


@pytest.mark.parametrize(
    ("value", "code", "words"),
    [
        *BAD[:3],
        pytest.param(MEMORY_TOKENS, "E045", "is not a subclass of", id="the-other-base"),
        pytest.param("idempotency.locks.base.LockBackend", "E046", "holding", id="abstract"),
    ],
)
def test_bad_lock_backend(value: Any, code: str, words: str) -> None:
    assert [m.id for m in checked(LOCK_BACKEND=value)] == [f"idempotency.{code}"]
    with (
        override_settings(IDEMPOTENCY={"LOCK_BACKEND": value}),
        pytest.raises(ImproperlyConfigured, match=words),
    ):
        lock("x").acquire()
    with pytest.raises(ImproperlyConfigured, match=words) as raised:
        lock("x", backend=value).acquire()
    assert "IDEMPOTENCY['LOCK_BACKEND'] =" not in str(raised.value)  # an argument, not it


def test_the_check_command_fails_on_a_bad_backend() -> None:
    with (
        override_settings(IDEMPOTENCY={"LOCK_BACKEND": "zookeeper"}),
        pytest.raises(SystemCheckError, match=r"idempotency\.E044"),
    ):
        call_command("check", databases=[], stdout=StringIO(), stderr=StringIO())


def test_a_third_party_backend_passes_the_checks() -> None:
    assert checked(LOCK_BACKEND=THREAD_LOCKS, SUBMIT_TOKEN_BACKEND=MEMORY_TOKENS) == []


# -- the built-in backends by dotted path, on real servers -----------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "path",
    [
        pytest.param("idempotency.locks.redis.RedisLockBackend", marks=pytest.mark.redis),
        pytest.param("idempotency.locks.postgres.PostgresLockBackend", marks=pytest.mark.postgres),
        pytest.param("idempotency.locks.mysql.MySQLLockBackend", marks=pytest.mark.mysql),
    ],
)
def test_built_in_lock_backends_by_dotted_path(path: str) -> None:
    name = unique("dotted")

    def try_lock(_index: int) -> bool:
        attempt = Lock(name, timeout=30, backend=path)
        taken = attempt.acquire(wait=0)
        if taken:
            time.sleep(0.2)  # held while the others try
            attempt.release()
        return taken

    with override_settings(IDEMPOTENCY={"LOCK_BACKEND": path}), lock(name, timeout=30) as held:
        assert held.owned()
        assert run_threads(6, try_lock) == [False] * 6
    assert run_threads(6, try_lock).count(True) == 1


@pytest.mark.parametrize(
    "path",
    [
        pytest.param(
            "idempotency.tokens.database.DatabaseTokens",
            marks=[pytest.mark.server_db, pytest.mark.django_db(transaction=True)],
        ),
        pytest.param(
            "idempotency.tokens.redis.RedisTokens", marks=[pytest.mark.redis, pytest.mark.django_db]
        ),
    ],
)
def test_built_in_token_backends_by_dotted_path(path: str) -> None:
    with override_settings(IDEMPOTENCY={"SUBMIT_TOKEN_BACKEND": path}):
        token = issue_submit_token(user_or_scope="tenant:dotted", purpose="form")

        def consume(_index: int) -> str:
            consume_submit_token(token=token, user_or_scope="tenant:dotted", purpose="form")
            return "ok"

        results = run_threads(10, consume)
    assert results.count("ok") == 1, results
    assert sum(isinstance(r, SubmitTokenUsed) for r in results) == 9, results
