"""Every completed record carries its authenticator (issue 43): the expiry and the
HMAC-SHA256 of :mod:`idempotency.stores.records`. Records completed before this
migration have none and are refused as forged until they expire (or are purged)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("idempotency", "0006_mysql_binary_quota_scope"),
    ]

    operations = [
        migrations.AddField(
            model_name="idempotencyrecord",
            name="mac",
            field=models.CharField(
                blank=True,
                db_default="",
                default="",
                help_text=(
                    "The completed record's expiry and HMAC-SHA256 under a key derived from "
                    "SECRET_KEY: a record that does not match it is never replayed."
                ),
                max_length=96,
                verbose_name="record authenticator",
            ),
        ),
    ]
