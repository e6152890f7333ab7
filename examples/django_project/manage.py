#!/usr/bin/env python
"""Django's command line for this project: python manage.py migrate, place_orders, ..."""

import os
import sys

from django.core.management import execute_from_command_line

if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shop.settings")
    execute_from_command_line(sys.argv)
