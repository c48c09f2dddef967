"""`celery -A chatsite ...` finds the app here; it is defined in workers/."""
from workers.app import app

__all__ = ["app"]
