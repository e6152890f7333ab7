"""The project's jobs. The worker loads them through shop.worker (Django set up)."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import close_old_connections
from django.utils import timezone

from jobqueue import JobQueue

from .models import Order

jq = JobQueue()  # DATABASE_URL and JOBQUEUE_SCHEMA from the environment


@dataclass
class Receipt:
    """The job's payload: checked when enqueued, given to the handler as a Receipt."""

    order_id: int


@jq.task("send_receipt", max_attempts=5)
def send_receipt(receipt: Receipt) -> None:
    """Send the order's receipt (here: print it), then note that it was sent. A sync
    handler: it runs in a worker thread, where Django's ORM works as usual."""
    try:
        order = Order.objects.get(pk=receipt.order_id)
        print(f"Receipt for order {order.id} sent to {order.email}", flush=True)
        Order.objects.filter(pk=order.id).update(receipt_sent_at=timezone.now())
    finally:
        close_old_connections()  # what Django does after each request
