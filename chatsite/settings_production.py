"""Production settings: DEBUG off, secrets and hosts from the environment, secure cookies.

    DJANGO_SETTINGS_MODULE=chatsite.settings_production
    DJANGO_SECRET_KEY=...  DJANGO_ALLOWED_HOSTS=chat.example.com  DATABASE_URL=...  REDIS_URL=...
"""
import os

os.environ["DJANGO_DEBUG"] = "false"
os.environ["CHATSITE_MAKE_SECRET_KEY"] = "false"  # below: a real secret or no start

from chatsite.install_secret import is_real_secret, read_secret_key  # noqa: E402
from chatsite.settings import *  # noqa: E402,F401,F403

# A real secret or no start: DJANGO_SECRET_KEY, or the key file made beforehand (scripts/setup.sh
# or `python -m chatsite.install_secret PATH`); production never makes one of its own.
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY") or read_secret_key(SECRET_KEY_FILE, create=False)  # noqa: F405
if not is_real_secret(SECRET_KEY):
    raise RuntimeError(f"DJANGO_SECRET_KEY (or {SECRET_KEY_FILE}) must hold a long random value in production "  # noqa: F405
                       "(at least 50 characters, not a default); make one with "
                       "`python -m chatsite.install_secret PATH` and point DJANGO_SECRET_KEY_FILE at it")
# /metrics answers only to its scrape token (CHATSITE_METRICS_TOKEN); without one it is closed.
CHATSITE = {**CHATSITE, "METRICS_REQUIRE_TOKEN": True}  # noqa: F405
ALLOWED_HOSTS = [h for h in os.environ["DJANGO_ALLOWED_HOSTS"].split(",") if h]
CSRF_TRUSTED_ORIGINS = [o for o in os.environ.get("DJANGO_CSRF_TRUSTED_ORIGINS", "").split(",") if o]

SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = os.environ.get("DJANGO_SSL_REDIRECT", "true") == "true"
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
SECURE_HSTS_SECONDS = int(os.environ.get("DJANGO_HSTS_SECONDS", "31536000"))
SECURE_HSTS_INCLUDE_SUBDOMAINS = True
SECURE_HSTS_PRELOAD = True
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
REST_FRAMEWORK = {**REST_FRAMEWORK, "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"]}  # noqa: F405
