"""On MySQL and MariaDB: scopes and keys compare byte for byte.

Their default collations compare text case-insensitively and, for the PAD SPACE ones,
ignore trailing spaces, so the unique ``(scope, key)`` index would take ``"abc"``,
``"ABC"`` and ``"abc "`` for one key (and two scopes differing only in case for one
client). A binary NO PAD collation makes them as distinct as on PostgreSQL and SQLite:
``utf8mb4_nopad_bin`` on MariaDB (10.2+), ``utf8mb4_0900_bin`` on MySQL (8.0.17+).
Other databases are left untouched. (Django's ``db_collation`` names one collation for
every database, so the model cannot say this; a later ``AlterField`` of these columns
would need to repeat it.)
"""

from django.db import migrations

COLUMNS = {
    "idempotency_idempotencyrecord": ("scope", "key"),
    "idempotency_submittoken": ("scope",),
}


def binary_collation(connection):
    return "utf8mb4_nopad_bin" if connection.mysql_is_mariadb else "utf8mb4_0900_bin"


def forwards(apps, schema_editor):
    connection = schema_editor.connection
    if connection.vendor != "mysql":
        return
    qn = connection.ops.quote_name
    collation = binary_collation(connection)
    for table, columns in COLUMNS.items():
        changes = ", ".join(
            f"MODIFY {qn(column)} varchar(255) CHARACTER SET utf8mb4 COLLATE {collation} NOT NULL"
            for column in columns
        )
        schema_editor.execute(f"ALTER TABLE {qn(table)} {changes}")


class Migration(migrations.Migration):

    dependencies = [
        ("idempotency", "0004_recordquota"),
    ]

    operations = [
        migrations.RunPython(forwards, migrations.RunPython.noop, atomic=False, elidable=False),
    ]
