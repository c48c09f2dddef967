"""Versions, edits, continuing, choosing a path, settings, search and export
through the REST API, in process (no workers: replies are finished by writing
their stream and finalizing, as a worker would)."""
import json

import pytest

from chatsite import redis_keys
from chatsite.chats.models import Chat, Message
from chatsite.redis_client import get_redis
from chatsite.runs.stream import codec
from chatsite.runs.models import GenerationRun
from chatsite.runs.services import run_finalize
from tests.runs.helpers import end_stream
from tests.api.helpers import assert_error, key_client
from tests.factories import ChatFactory, TenantFactory, UserFactory

pytestmark = pytest.mark.django_db
J = "application/json"


@pytest.fixture
def client(api_key):
    return key_client(api_key)


def finish(run_id: int, text: str, reason: str = "stop") -> GenerationRun:
    """What a worker does: the reply's tokens and terminal entry in the stream, then finalize."""
    get_redis().xadd(redis_keys.run_stream(run_id), codec.token_fields(seq=0, n=3, text=text, attempt=1))
    end_stream(run_id, codec.done_fields(finish_reason=reason, prompt_tokens=5, completion_tokens=3))
    run_finalize(run_id=run_id)
    return GenerationRun.objects.get(pk=run_id)


def send(client, chat_id, content, path="messages/", **extra):
    resp = client.post(f"/api/chats/{chat_id}/{path}", {"content": content, **extra}, content_type=J)
    assert resp.status_code == 202, resp.content
    return resp.json()


def path_of(client, chat_id) -> list[tuple[str, str]]:
    return [(m["role"], m["content"]) for m in client.get(f"/api/chats/{chat_id}/messages/").json()["results"]]


def test_regenerate_keeps_both_versions_and_the_next_prompt_follows_the_chosen_one(client, chat):
    first = send(client, chat.pk, "Name a colour")
    finish(first["run"]["id"], "Red")
    reply_id = first["assistant_message"]["id"]
    regen = client.post(f"/api/chats/{chat.pk}/messages/{reply_id}/regenerate", {"temperature": 1.2}, content_type=J)
    assert regen.status_code == 202, regen.content
    second = regen.json()
    assert second["user_message"]["id"] == first["user_message"]["id"]  # the same question
    assert second["assistant_message"]["versions"] == [reply_id, second["assistant_message"]["id"]]
    assert second["run"]["sampling"]["temperature"] == 1.2
    assert GenerationRun.objects.get(pk=second["run"]["id"]).prompt_snapshot == [
        {"role": "user", "content": "Name a colour"}]
    finish(second["run"]["id"], "Blue")
    assert path_of(client, chat.pk) == [("user", "Name a colour"), ("assistant", "Blue")]

    chosen = client.post(f"/api/chats/{chat.pk}/messages/{reply_id}/select")  # back to version 1
    assert chosen.status_code == 200 and chosen.json()["leaf"] == reply_id
    assert [m["content"] for m in chosen.json()["results"]] == ["Red"]
    assert path_of(client, chat.pk) == [("user", "Name a colour"), ("assistant", "Red")]
    third = send(client, chat.pk, "Why?")
    assert GenerationRun.objects.get(pk=third["run"]["id"]).prompt_snapshot == [
        {"role": "user", "content": "Name a colour"}, {"role": "assistant", "content": "Red"},
        {"role": "user", "content": "Why?"}]
    assert third["user_message"]["parent"] == reply_id


def test_edit_makes_a_new_branch_and_the_old_one_stays_reachable(client, chat):
    one = send(client, chat.pk, "Hi")
    finish(one["run"]["id"], "Hello")
    two = send(client, chat.pk, "Tell me about cats")
    finish(two["run"]["id"], "Cats purr")
    edited = send(client, chat.pk, "Tell me about dogs", path=f"messages/{two['user_message']['id']}/edit")
    assert edited["user_message"]["versions"] == [two["user_message"]["id"], edited["user_message"]["id"]]
    assert GenerationRun.objects.get(pk=edited["run"]["id"]).prompt_snapshot == [
        {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"},
        {"role": "user", "content": "Tell me about dogs"}]
    finish(edited["run"]["id"], "Dogs bark")
    assert path_of(client, chat.pk)[2:] == [("user", "Tell me about dogs"), ("assistant", "Dogs bark")]
    client.post(f"/api/chats/{chat.pk}/messages/{two['user_message']['id']}/select")
    assert path_of(client, chat.pk)[2:] == [("user", "Tell me about cats"), ("assistant", "Cats purr")]
    err = assert_error(client.post(f"/api/chats/{chat.pk}/messages/{one['assistant_message']['id']}/edit",
                                   {"content": "x"}, content_type=J), 400, field="message")
    assert "only a message you sent" in err["message"]


def test_continue_appends_to_a_reply_cut_at_the_length_limit(client, chat):
    first = send(client, chat.pk, "Count", max_tokens=3)
    reply_id = first["assistant_message"]["id"]
    assert_error(client.post(f"/api/chats/{chat.pk}/messages/{reply_id}/continue", {}, content_type=J), 400)
    finish(first["run"]["id"], "one two", reason="length")
    resp = client.post(f"/api/chats/{chat.pk}/messages/{reply_id}/continue", {"max_tokens": 4}, content_type=J)
    assert resp.status_code == 202, resp.content
    cont = resp.json()
    run = GenerationRun.objects.get(pk=cont["run"]["id"])
    assert run.max_tokens == 4 and run.user_message_id == first["user_message"]["id"]
    assert run.prompt_snapshot[-1] == {"role": "assistant", "content": "one two"}  # the worker carries on from it
    assert cont["assistant_message"]["content"] == "one two"
    assert cont["assistant_message"]["versions"] == [cont["assistant_message"]["id"]]  # replaces, not a version
    finish(run.pk, " three")
    assert Message.objects.get(pk=cont["assistant_message"]["id"]).content == "one two three"
    assert path_of(client, chat.pk) == [("user", "Count"), ("assistant", "one two three")]
    assert Message.objects.get(pk=reply_id).replaced_by_id == cont["assistant_message"]["id"]
    again = assert_error(client.post(f"/api/chats/{chat.pk}/messages/{reply_id}/continue", {}, content_type=J), 400)
    assert "already continued" in again["message"]
    stopped = assert_error(client.post(f"/api/chats/{chat.pk}/messages/{cont['assistant_message']['id']}/continue",
                                       {}, content_type=J), 400, field="message")
    assert "length limit" in stopped["message"]


def test_continue_right_after_the_streams_end_saves_the_reply_first(client, chat):
    """The page shows "Continue" once the stream's terminal entry arrives, which can be before
    the worker saved the reply: the continue saves it from the stream (as a busy chat's next
    turn does), not a 400 for a reply not yet known to have reached the length limit."""
    first = send(client, chat.pk, "Count", max_tokens=3)
    run_id, reply_id = first["run"]["id"], first["assistant_message"]["id"]
    get_redis().xadd(redis_keys.run_stream(run_id), codec.token_fields(seq=0, n=3, text="one two", attempt=1))
    end_stream(run_id, codec.done_fields(finish_reason="length", prompt_tokens=5, completion_tokens=3))  # not saved
    resp = client.post(f"/api/chats/{chat.pk}/messages/{reply_id}/continue", {"max_tokens": 4}, content_type=J)
    assert resp.status_code == 202, resp.content
    assert resp.json()["assistant_message"]["content"] == "one two"
    assert GenerationRun.objects.get(pk=run_id).finish_reason == "length"


def test_continue_keeps_to_the_chats_reply_length(client, chat):
    """Continue after "Reached the length limit" generated the pool's default (~1,000 tokens
    on the demo pools) when the chat's own reply length was 25."""
    assert client.patch(f"/api/chats/{chat.pk}/", {"max_tokens": 25}, content_type=J).status_code == 200
    first = send(client, chat.pk, "Tell me a long story")
    assert GenerationRun.objects.get(pk=first["run"]["id"]).max_tokens == 25
    finish(first["run"]["id"], "Once upon", reason="length")
    reply_id = first["assistant_message"]["id"]
    resp = client.post(f"/api/chats/{chat.pk}/messages/{reply_id}/continue", {}, content_type=J)
    assert resp.status_code == 202, resp.content
    assert resp.json()["run"]["max_tokens"] == 25
    finish(resp.json()["run"]["id"], " a time", reason="length")
    again = client.post(f"/api/chats/{chat.pk}/messages/{resp.json()['assistant_message']['id']}/continue",
                        {"max_tokens": 7}, content_type=J)
    assert again.json()["run"]["max_tokens"] == 7  # the client's own length still wins


def test_chat_settings_are_saved_and_used_by_its_runs(client, pool):
    resp = client.post("/api/chats/", {"model": "flagship", "system_prompt": "Answer in French.",
                                       "temperature": 0.2, "max_tokens": 77}, content_type=J)
    assert resp.status_code == 201, resp.content
    chat = resp.json()
    assert (chat["system_prompt"], chat["temperature"], chat["max_tokens"]) == ("Answer in French.", 0.2, 77)
    posted = send(client, chat["id"], "Hello")
    run = GenerationRun.objects.get(pk=posted["run"]["id"])
    assert run.max_tokens == 77 and run.sampling["temperature"] == 0.2
    assert run.prompt_snapshot == [{"role": "system", "content": "Answer in French."},
                                   {"role": "user", "content": "Hello"}]
    finish(run.pk, "Bonjour")
    cleared = client.patch(f"/api/chats/{chat['id']}/", {"system_prompt": None, "temperature": None,
                                                          "max_tokens": None}, content_type=J).json()
    assert (cleared["system_prompt"], cleared["temperature"], cleared["max_tokens"]) == ("", None, None)
    assert_error(client.patch(f"/api/chats/{chat['id']}/", {"temperature": 3}, content_type=J), 400,
                 field="temperature")
    err = assert_error(client.patch(f"/api/chats/{chat['id']}/", {"max_tokens": 10**6}, content_type=J), 400,
                       field="max_tokens")
    assert "from 1 to 512" in err["message"]


def test_messages_page_before_and_after_a_message_on_the_path(client, chat):
    ids = []
    for i in range(4):
        posted = send(client, chat.pk, f"q{i}")
        finish(posted["run"]["id"], f"a{i}")
        ids += [posted["user_message"]["id"], posted["assistant_message"]["id"]]
    older = client.get(f"/api/chats/{chat.pk}/messages/?before={ids[5]}&limit=2").json()
    assert [m["content"] for m in older["results"]] == ["a1", "q2"] and older["count"] == 8
    assert f"before={ids[3]}" in older["previous"] and f"after={ids[4]}" in older["next"]
    newer = client.get(f"/api/chats/{chat.pk}/messages/?after={ids[5]}").json()
    assert [m["content"] for m in newer["results"]] == ["q3", "a3"] and newer["next"] is None
    assert client.get(f"/api/chats/{chat.pk}/messages/?before={ids[0]}").json()["results"] == []
    assert_error(client.get(f"/api/chats/{chat.pk}/messages/?before=abc"), 400, field="before")


def test_search_finds_titles_and_message_text_of_my_listed_chats_only(client, tenant, user, pool):
    mine = ChatFactory(tenant=tenant, owner=user, pool=pool, title="Holiday plans")
    send(client, mine.pk, "Which museums in Lisbon open on Mondays?")
    ChatFactory(tenant=tenant, owner=user, pool=pool, title="Groceries")
    hidden = ChatFactory(tenant=tenant, owner=user, pool=pool, title="Lisbon via the API", listed=False)
    other_user = ChatFactory(tenant=tenant, owner=UserFactory(tenant=tenant), pool=pool, title="Lisbon trip")
    other_tenant = ChatFactory(tenant=TenantFactory(), pool=pool, title="Lisbon")
    found = client.get("/api/chats/search/?q=lisb").json()["results"]  # a prefix, while typing
    assert [c["id"] for c in found] == [mine.pk]
    assert "\u2063[Lisbon]\u2063" in found[0]["snippet"]
    assert [c["title"] for c in client.get("/api/chats/search/?q=holidays").json()["results"]] == ["Holiday plans"]
    assert {hidden.pk, other_user.pk, other_tenant.pk}.isdisjoint(c["id"] for c in found)
    assert_error(client.get("/api/chats/search/?q=%20"), 400, field="q")
    assert_error(client.get("/api/chats/search/?q=x&limit=0"), 400, field="limit")


def test_export_as_markdown_and_json(client, chat):
    posted = send(client, chat.pk, "What is 2+2?")
    finish(posted["run"]["id"], "**4**")
    regen = client.post(f"/api/chats/{chat.pk}/messages/{posted['assistant_message']['id']}/regenerate", {},
                        content_type=J).json()
    finish(regen["run"]["id"], "Four")
    md = client.get(f"/api/chats/{chat.pk}/export.md")
    assert md.status_code == 200 and md["Content-Type"].startswith("text/markdown")
    assert "attachment" in md["Content-Disposition"]
    text = md.content.decode()
    assert "## You\n\nWhat is 2+2?" in text and "## Assistant\n\nFour" in text and "**4**" not in text
    doc = json.loads(client.get(f"/api/chats/{chat.pk}/export.json").content)
    assert [m["content"] for m in doc["messages"]] == ["What is 2+2?", "**4**", "Four"]
    assert doc["path"] == [posted["user_message"]["id"], regen["assistant_message"]["id"]]
    assert doc["messages"][2]["parent"] == posted["user_message"]["id"] and doc["messages"][2]["model"] == "flagship"


def test_another_tenants_and_users_chats_and_messages_are_404(client, chat, tenant, pool):
    posted = send(client, chat.pk, "mine")
    finish(posted["run"]["id"], "ok")
    theirs = ChatFactory(tenant=TenantFactory(), pool=pool)
    msg = Message.objects.create(chat=theirs, role="assistant", content="secret")
    colleague = ChatFactory(tenant=tenant, owner=UserFactory(tenant=tenant), pool=pool)
    for other in (theirs, colleague):
        for path in ("export.md", "export.json", "messages/"):
            assert_error(client.get(f"/api/chats/{other.pk}/{path}"), 404)
        for action in ("regenerate", "edit", "continue", "select"):
            assert_error(client.post(f"/api/chats/{other.pk}/messages/{msg.pk}/{action}", {"content": "x"},
                                     content_type=J), 404)
    # their message id under my chat is not found either
    assert_error(client.post(f"/api/chats/{chat.pk}/messages/{msg.pk}/regenerate", {}, content_type=J), 404)
    assert_error(client.get(f"/api/chats/{chat.pk}/messages/?after={msg.pk}"), 404)


def test_chat_list_keyset_pages_and_the_listed_filter(client, tenant, user, pool):
    chats = [ChatFactory(tenant=tenant, owner=user, pool=pool, title=f"c{i}") for i in range(5)]
    ChatFactory(tenant=tenant, owner=user, pool=pool, title="api", listed=False)
    first = client.get("/api/chats/?listed=true&limit=2").json()
    last = first["results"][-1]
    page = client.get(f"/api/chats/?listed=true&limit=2&before={last['updated_at']},{last['id']}").json()
    seen = [c["title"] for c in first["results"] + page["results"]]
    page3 = client.get(page["next"]).json()
    seen += [c["title"] for c in page3["results"]]
    assert seen == [c.title for c in reversed(chats)] and page3["next"] is None
    assert [c["title"] for c in client.get("/api/chats/?listed=false").json()["results"]] == ["api"]
    assert_error(client.get("/api/chats/?before=nonsense"), 400, field="before")
    assert Chat.objects.filter(listed=False).count() == 1


def test_actions_are_idempotent_and_wait_for_the_reply_in_progress(client, chat):
    first = send(client, chat.pk, "Hi")
    reply_id = first["assistant_message"]["id"]
    busy = assert_error(client.post(f"/api/chats/{chat.pk}/messages/{reply_id}/select"), 409)
    assert "still being generated" in busy["message"]
    assert_error(client.post(f"/api/chats/{chat.pk}/messages/{reply_id}/regenerate", {}, content_type=J), 409)
    finish(first["run"]["id"], "Hello")
    url = f"/api/chats/{chat.pk}/messages/{reply_id}/regenerate"
    one = client.post(url, {}, content_type=J, HTTP_IDEMPOTENCY_KEY="regen-1")
    two = client.post(url, {}, content_type=J, HTTP_IDEMPOTENCY_KEY="regen-1")
    assert one.status_code == two.status_code == 202
    assert one.json()["run"]["id"] == two.json()["run"]["id"]
    assert Message.objects.filter(chat=chat, role="assistant").count() == 2
    err = assert_error(client.post(f"/api/chats/{chat.pk}/messages/{first['user_message']['id']}/regenerate", {},
                                   content_type=J), 400, field="message")
    assert "only a reply can be regenerated" in err["message"]


def test_a_message_after_a_path_end_answers_its_versions(client, chat):
    """A turn at the end of its path has no other versions; one after a path end that
    another turn follows already is a version beside that turn."""
    first = send(client, chat.pk, "one")
    finish(first["run"]["id"], "reply one")
    second = send(client, chat.pk, "two")
    assert second["user_message"]["versions"] == [second["user_message"]["id"]]
    assert second["assistant_message"]["versions"] == [second["assistant_message"]["id"]]
    finish(second["run"]["id"], "reply two")
    # A path end that already has a turn after it (here: the chat's saved end moved back to
    # the first reply): the new message is a version beside that turn, read as before.
    Chat.objects.filter(pk=chat.pk).update(current_leaf_id=first["assistant_message"]["id"])
    third = send(client, chat.pk, "three")
    assert third["user_message"]["versions"] == [second["user_message"]["id"], third["user_message"]["id"]]
    assert third["assistant_message"]["versions"] == [third["assistant_message"]["id"]]


def test_pin_and_archive_a_chat(client, chat, tenant, user, pool):
    other = ChatFactory(tenant=tenant, owner=user, pool=pool, title="Other")
    chat.title = "Trip planning"
    chat.save()
    send(client, chat.pk, "Where should we stay in Lisbon?")
    before = client.get(f"/api/chats/{chat.pk}/").json()
    pinned = client.patch(f"/api/chats/{chat.pk}/", {"pinned": True}, content_type=J).json()
    assert pinned["pinned_at"] and pinned["updated_at"] == before["updated_at"]  # its place by date is kept
    listed = lambda q: [c["id"] for c in client.get(f"/api/chats/?listed=true{q}").json()["results"]]  # noqa: E731
    assert listed("&pinned=true") == [chat.pk] and listed("&pinned=false") == [other.pk]

    archived = client.patch(f"/api/chats/{chat.pk}/", {"archived": True}, content_type=J).json()
    assert archived["archived_at"] and archived["pinned_at"] == pinned["pinned_at"]
    assert listed("&archived=false") == [other.pk] and listed("&archived=true") == [chat.pk]
    found = client.get("/api/chats/search/?q=Lisbon").json()["results"]
    assert [c["id"] for c in found] == [chat.pk] and found[0]["archived_at"]  # search still finds it
    assert client.get(f"/api/chats/{chat.pk}/").status_code == 200

    assert_error(client.patch(f"/api/chats/{chat.pk}/", {"archived": "yes"}, content_type=J), 400, field="archived")
    refused = client.patch(f"/api/chats/{chat.pk}/", {"archived": False, "temperature": 9}, content_type=J)
    assert_error(refused, 400, field="temperature")
    assert client.get(f"/api/chats/{chat.pk}/").json()["archived_at"]  # nothing changed
    restored = client.patch(f"/api/chats/{chat.pk}/", {"archived": False, "pinned": False, "title": "Lisbon"},
                            content_type=J).json()
    assert (restored["archived_at"], restored["pinned_at"], restored["title"]) == (None, None, "Lisbon")
    assert set(listed("&archived=false")) == {chat.pk, other.pk}
    assert client.delete(f"/api/chats/{chat.pk}/").status_code == 409  # delete stays (once its reply is done)
