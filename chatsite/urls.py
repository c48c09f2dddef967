from django.contrib import admin
from django.urls import include, path

from chatsite.metrics.views import metrics as metrics_view
from chatsite.web.operations import operations

urlpatterns = [
    path("admin/operations/", operations, name="operations"),
    path("admin/", admin.site.urls),
    path("metrics", metrics_view),
    path("api/", include("chatsite.api.urls")),
    path("v1/", include("chatsite.openai_api.urls")),
    path("", include("chatsite.web.urls")),
]

handler400 = "chatsite.web.errors.handler400"
handler403 = "chatsite.web.errors.handler403"
handler404 = "chatsite.web.errors.handler404"
handler500 = "chatsite.web.errors.handler500"
