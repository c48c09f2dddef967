"""/admin/operations/: the figures an operator checks first, for staff (the admin's look)."""
from functools import wraps

from django.contrib import admin
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.shortcuts import render

from chatsite.metrics.overview import operations_overview


def staff_only(view):
    """Sign in first; signed in without staff rights: the product's 403 page."""

    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path(), "admin:login")
        if not request.user.is_staff:
            raise PermissionDenied("operators only")
        return view(request, *args, **kwargs)

    return wrapper


@staff_only
def operations(request):
    context = {**admin.site.each_context(request), "title": "Operations", "overview": operations_overview()}
    return render(request, "admin/operations.html", context)
