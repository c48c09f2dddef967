"""Static files, served by whitenoise from this Django view.

Whitenoise's middleware is not hooks only, so placed in MIDDLEWARE it would send every
/v1 request back to Django's async path (chatsite/edge/flat_middleware.FlatMiddleware); as the
view behind /static/ it costs other requests nothing. It serves collectstatic's files
(hashed names: cached for a year, immutable) compressed as the browser accepts (brotli,
gzip), and under DEBUG the files of static/ as they are edited."""
from functools import cache

from django.http import Http404
from django.views.decorators.http import require_safe
from whitenoise.middleware import WhiteNoiseMiddleware
from whitenoise.storage import CompressedManifestStaticFilesStorage


class StaticFilesStorage(CompressedManifestStaticFilesStorage):
    """Whitenoise's storage (settings.STORAGES), leaving a script's `sourceMappingURL` as it is:
    the vendored libraries name source maps that are not shipped (static/vendor/README.md),
    which the manifest would refuse as missing files. CSS references are still rewritten."""

    patterns = tuple((glob, rules) for glob, rules in CompressedManifestStaticFilesStorage.patterns if glob != "*.js")


@cache
def _whitenoise() -> WhiteNoiseMiddleware:
    return WhiteNoiseMiddleware()  # reads STATIC_ROOT's files (and their compressed copies) once


@require_safe
def serve(request):
    files = _whitenoise()
    found = files.find_file(request.path_info) if files.autorefresh else files.files.get(request.path_info)
    if found is None:
        raise Http404("no such file")
    return files.serve(found, request)
