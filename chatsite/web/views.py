"""Server-rendered pages."""
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse, JsonResponse
from django.shortcuts import render

from chatsite.api.errors import json_handler404, json_handler500


@login_required
def home(request):
    return render(request, "web/home.html")


def healthz(request):
    return JsonResponse({"ok": True})


def handler404(request, exception=None):
    if request.path.startswith(("/api/", "/v1/")):
        return json_handler404(request, exception)
    return HttpResponse("Not found", status=404, content_type="text/plain")


def handler500(request):
    if request.path.startswith(("/api/", "/v1/")):
        return json_handler500(request)
    return HttpResponse("Server error", status=500, content_type="text/plain")
