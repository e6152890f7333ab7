"""Settings: one app, PostgreSQL through psycopg 3, the database from DATABASE_URL."""

import os
from urllib.parse import parse_qsl, unquote, urlsplit

from django.core.exceptions import ImproperlyConfigured

if "DATABASE_URL" not in os.environ:
    raise ImproperlyConfigured("set DATABASE_URL=postgresql://user:password@host:port/dbname")
_url = urlsplit(os.environ["DATABASE_URL"])

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "only-for-this-example")
INSTALLED_APPS = ["orders"]
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",  # psycopg 3 when installed
        "NAME": _url.path.lstrip("/"),
        "USER": unquote(_url.username or ""),
        "PASSWORD": unquote(_url.password or ""),
        "HOST": _url.hostname or "",
        "PORT": str(_url.port or ""),
        "OPTIONS": dict(parse_qsl(_url.query)),  # sslmode=..., options=-csearch_path=...
    }
}
