"""Shared steps for API tests: in-process clients, and rows counted before and after."""
from django.test import Client

from chatsite.chats.models import Chat, Message
from chatsite.runs.models import GenerationRun


def key_client(secret: str) -> Client:
    """A Django test client that sends `Authorization: Bearer secret` on every request."""
    return Client(HTTP_AUTHORIZATION=f"Bearer {secret}")


def row_counts() -> tuple[int, int, int]:
    return Chat.objects.count(), Message.objects.count(), GenerationRun.objects.count()


def assert_error(resp, status: int, code: str | None = None, field: str | None = None) -> dict:
    """The response is `status` in the REST API's one error shape; returns its error object."""
    assert resp.status_code == status, resp.content[:500]
    assert resp["Content-Type"].startswith("application/json"), resp["Content-Type"]
    err = resp.json()["error"]
    assert set(err) <= {"code", "message", "field"} and err["message"], err
    if code is not None:
        assert err["code"] == code, err
    if field is not None:
        assert err.get("field") == field, err
    return err


def assert_openai_error(resp, status: int, code: str | None = None, param: str | None = None) -> dict:
    """The response is `status` in OpenAI's error shape; returns its error object."""
    assert resp.status_code == status, resp.content[:500]
    assert resp["Content-Type"].startswith("application/json"), resp["Content-Type"]
    err = resp.json()["error"]
    assert set(err) == {"message", "type", "param", "code"} and err["message"], err
    if code is not None:
        assert err["code"] == code, err
    if param is not None:
        assert err["param"] == param, err
    return err
