"""On MySQL and MariaDB: the record quota's scopes compare byte for byte too.

``0005_mysql_binary_keys`` gave the records' and the submit tokens' columns a binary NO
PAD collation and left ``RecordQuota.scope`` with the database's default, which compares
case-insensitively: ``merchant:ACME`` and ``merchant:acme`` (two callers) counted against
one ``MAX_NEW_RECORDS`` cap. The same collation as 0005's (``utf8mb4_nopad_bin`` on
MariaDB, ``utf8mb4_0900_bin`` on MySQL) makes them two. Other databases are left untouched.
"""

from django.db import migrations


def forwards(apps, schema_editor):
    connection = schema_editor.connection
    if connection.vendor != "mysql":
        return
    qn = connection.ops.quote_name
    collation = "utf8mb4_nopad_bin" if connection.mysql_is_mariadb else "utf8mb4_0900_bin"
    schema_editor.execute(
        f"ALTER TABLE {qn('idempotency_recordquota')} MODIFY {qn('scope')} "
        f"varchar(255) CHARACTER SET utf8mb4 COLLATE {collation} NOT NULL"
    )


class Migration(migrations.Migration):

    dependencies = [
        ("idempotency", "0005_mysql_binary_keys"),
    ]

    operations = [
        migrations.RunPython(forwards, migrations.RunPython.noop, atomic=False, elidable=False),
    ]
