"""The worker's entry point: Django set up first, then the tasks.

jobqueue worker --app shop.worker:jq
"""

import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shop.settings")
django.setup()

from orders.tasks import jq  # noqa: E402  (the models load only after django.setup())

__all__ = ["jq"]
