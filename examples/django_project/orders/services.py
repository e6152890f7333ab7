"""Placing orders: each order and its receipt job are stored in one transaction."""

from __future__ import annotations

from django.db import connection, transaction

from .models import Order
from .tasks import Receipt, send_receipt


def place_orders(orders: list[tuple[str, int]]) -> list[Order]:
    """Store every (email, quantity) as an Order with its send_receipt job, all or none:
    a bad one rolls back the orders and jobs before it."""
    placed = []
    with transaction.atomic():
        for email, quantity in orders:
            if quantity < 1:
                raise ValueError(f"{email}: quantity must be at least 1, got {quantity}")
            order = Order.objects.create(email=email, quantity=quantity)
            # On Django's connection: the job joins the atomic block's transaction.
            send_receipt.enqueue(Receipt(order_id=order.id), conn=connection)
            placed.append(order)
    return placed
