"""Existing conversations become single-path trees: each message's parent is the one
before it in its chat, the chat's leaf its newest message; chats made through the
OpenAI-compatible API leave the web sidebar."""
from django.db import migrations

CHAIN = """
UPDATE chats_message AS m SET parent_id = s.prev, depth = s.depth
FROM (SELECT id, lag(id) OVER w AS prev, (row_number() OVER w) - 1 AS depth
      FROM chats_message WINDOW w AS (PARTITION BY chat_id ORDER BY id)) AS s
WHERE m.id = s.id;
UPDATE chats_chat AS c SET current_leaf_id = (SELECT max(id) FROM chats_message WHERE chat_id = c.id);
UPDATE chats_chat AS c SET listed = false
WHERE EXISTS (SELECT 1 FROM runs_generationrun r WHERE r.chat_id = c.id AND r.source = 'openai');
"""


class Migration(migrations.Migration):
    dependencies = [("chats", "0002_tree_settings_search"), ("runs", "0001_initial")]

    operations = [migrations.RunSQL(CHAIN, migrations.RunSQL.noop)]
