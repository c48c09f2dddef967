"""A finished conversation written straight to the database, for pages that need
history (screenshots, layout): the rows the services would have written (one
path: each message's parent is the one before it; the chat's leaf its last)."""
from datetime import timedelta

from django.utils import timezone

from chatsite.chats.models import Chat, Message
from chatsite.runs.models import GenerationRun

READ_A_FILE = '''Use a `with` block so the file is closed for you, and iterate over the file object: it yields one line at a time without loading the whole file.

```python
with open("notes.txt", encoding="utf-8") as f:
    for number, line in enumerate(f, start=1):
        print(number, line.rstrip("\\n"))
```

A few things worth knowing:

- **Memory**: iterating is lazy, so this works for files larger than RAM.
- **Newlines**: each `line` keeps its trailing `\\n`; strip it with `rstrip()`.
- **Encoding**: pass `encoding=` explicitly, or the platform default is used.

If you need every line in a list, `f.readlines()` does that, but only for small files.'''

CONVERSATION = [("How do I read a file line by line in Python?", READ_A_FILE)]


def seed_chat(*, user, pool, title: str = "Reading files line by line", turns=CONVERSATION) -> Chat:
    tenant = user.memberships.get().tenant
    chat = Chat.objects.create(tenant=tenant, owner=user, pool=pool, title=title)
    replied = None
    for i, (question, answer) in enumerate(turns):
        asked = Message.objects.create(chat=chat, role="user", content=question, token_count=len(question) // 4,
                                       parent=replied, depth=2 * i)
        tokens = max(1, len(answer) // 4)
        replied = Message.objects.create(chat=chat, role="assistant", content=answer, token_count=tokens,
                                         parent=asked, depth=2 * i + 1)
        queued = timezone.now() - timedelta(minutes=5 - i)
        first = queued + timedelta(milliseconds=240)
        GenerationRun.objects.create(
            tenant=tenant, chat=chat, user_message=asked, assistant_message=replied, pool=pool, status="completed",
            attempt=1, seed=7 + i, max_tokens=512, started_at=queued, first_token_at=first,
            finished_at=first + timedelta(seconds=(tokens - 1) / 41.3), ttft_ms=240, itl_ms=1000 / 41.3,
            prompt_tokens=asked.token_count + 12, completion_tokens=tokens, finish_reason="stop")
    chat.current_leaf = replied
    chat.save(update_fields=["current_leaf"])
    return chat
