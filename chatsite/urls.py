from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include("chatsite.api.urls")),
    path("", include("chatsite.web.urls")),
]

handler404 = "chatsite.web.views.handler404"
handler500 = "chatsite.web.views.handler500"
