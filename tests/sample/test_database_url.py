"""The sample's ``DATABASE_URL``: a URL's query string carries Django's psycopg options,
typed as Django expects them (``server_side_binding`` is honoured only when it is True)."""

from __future__ import annotations

import pytest

from config.settings import database_from_url


def test_sqlite_url_is_a_file_or_memory() -> None:
    assert database_from_url("sqlite:///tmp/x.sqlite3")["NAME"] == "tmp/x.sqlite3"
    assert database_from_url("sqlite://")["NAME"] == ":memory:"


def test_server_side_binding_and_prepare_threshold_are_typed() -> None:
    options = database_from_url(
        "postgres://u@db:5433/shop?server_side_binding=true&prepare_threshold=5&sslmode=require"
    )["OPTIONS"]
    assert options == {"server_side_binding": True, "prepare_threshold": 5, "sslmode": "require"}


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("server_side_binding=false", {"server_side_binding": False}),
        ("server_side_binding=True", {"server_side_binding": True}),
        ("server_side_binding=1", {"server_side_binding": True}),
        ("prepare_threshold=none", {"prepare_threshold": None}),
        ("", {}),
    ],
)
def test_option_values(query: str, expected: dict[str, object]) -> None:
    assert database_from_url(f"postgres://u@db/shop?{query}")["OPTIONS"] == expected


def test_a_threshold_that_is_not_a_number_is_refused_at_startup() -> None:
    with pytest.raises(ValueError, match="prepare_threshold is a number or none, not 'often'"):
        database_from_url("postgres://u@db/shop?prepare_threshold=often")


def test_mysql_and_mariadb_urls_get_utf8mb4_and_strict_mode() -> None:
    for scheme in ("mysql", "mariadb"):
        entry = database_from_url(f"{scheme}://root:s%40cret@db:3307/shop?connect_timeout=5")
        assert entry["ENGINE"] == "django.db.backends.mysql"
        assert (entry["USER"], entry["PASSWORD"], entry["HOST"], entry["PORT"], entry["NAME"]) == (
            "root",
            "s@cret",
            "db",
            "3307",
            "shop",
        )
        assert entry["OPTIONS"]["charset"] == "utf8mb4"
        assert "STRICT_TRANS_TABLES" in entry["OPTIONS"]["init_command"]
        assert entry["OPTIONS"]["connect_timeout"] == 5
        assert entry["TEST"]["CHARSET"] == "utf8mb4"


def test_postgres_url_without_a_name_is_the_postgres_database() -> None:
    entry = database_from_url("postgresql://postgres@127.0.0.1:5432/")
    assert (entry["ENGINE"], entry["NAME"], entry["PORT"]) == (
        "django.db.backends.postgresql",
        "postgres",
        "5432",
    )


def test_an_unknown_scheme_is_refused_at_startup() -> None:
    with pytest.raises(ValueError, match="Unsupported DATABASE_URL scheme: 'oracle2'"):
        database_from_url("oracle2://u@db/shop")
