from django.contrib import admin
from django.urls import include, path

from chatsite.metrics.views import metrics as metrics_view

urlpatterns = [
    path("admin/", admin.site.urls),
    path("metrics", metrics_view),
    path("api/", include("chatsite.api.urls")),
    path("v1/", include("chatsite.openai_api.urls")),
    path("", include("chatsite.web.urls")),
]

handler404 = "chatsite.web.views.handler404"
handler500 = "chatsite.web.views.handler500"
