"""The Django project: its settings, and the entry point of its jobqueue worker."""
