"""python manage.py place_orders a@example.com:2 b@example.com:1"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from orders.services import place_orders


class Command(BaseCommand):
    help = "Place orders (EMAIL:QUANTITY ...), all or none, each with its receipt job."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("orders", nargs="+", metavar="EMAIL:QUANTITY")

    def handle(self, *args: Any, **options: Any) -> None:
        wanted = []
        for arg in options["orders"]:
            email, _, quantity = arg.rpartition(":")
            if not email or not quantity.lstrip("-").isdigit():
                raise CommandError(f"expected EMAIL:QUANTITY, got {arg!r}")
            wanted.append((email, int(quantity)))
        try:
            placed = place_orders(wanted)
        except ValueError as exc:
            raise CommandError(f"no order placed: {exc}") from exc
        for order in placed:
            self.stdout.write(f"Placed order {order.id} for {order.email}")
