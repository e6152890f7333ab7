# The fields' types are spelled out: django-stubs infers them only with its mypy plugin,
# which would have to import these settings on every mypy run.
from __future__ import annotations

from datetime import datetime

from django.db import models


class Order(models.Model):
    id: models.BigAutoField[int, int] = models.BigAutoField(primary_key=True)
    email: models.EmailField[str, str] = models.EmailField()
    quantity: models.PositiveIntegerField[int, int] = models.PositiveIntegerField()
    receipt_sent_at: models.DateTimeField[datetime | None, datetime | None] = models.DateTimeField(
        null=True
    )
