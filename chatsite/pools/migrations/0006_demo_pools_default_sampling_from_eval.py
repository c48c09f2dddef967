"""The demo pools' default sampling as the demo's evaluation chose it (bench/eval_demo):
temperature 0.3, top_p 0.4, repetition penalty 1.1, 512 tokens, instead of 0.7, 0.95 and
1,024. Only a demo pool still holding the old defaults exactly is changed: an operator's
own defaults stay. The values are written here, not imported: a migration keeps its meaning."""
from django.db import migrations

POOLS = ("flagship", "small")
OLD = {"temperature": 0.7, "top_p": 0.95, "max_tokens": 1024}
NEW = {"temperature": 0.3, "top_p": 0.4, "repetition_penalty": 1.1, "max_tokens": 512}


def _move(apps, before: dict, after: dict) -> None:
    ModelPool = apps.get_model("pools", "ModelPool")
    for pool in ModelPool.objects.filter(name__in=POOLS):
        if pool.default_sampling == before:
            pool.default_sampling = dict(after)
            pool.save(update_fields=["default_sampling"])


def forwards(apps, schema_editor):
    _move(apps, OLD, NEW)


def backwards(apps, schema_editor):
    _move(apps, NEW, OLD)


class Migration(migrations.Migration):

    dependencies = [
        ("pools", "0005_modelpool_chat_template"),
    ]

    operations = [
        migrations.RunPython(forwards, backwards),
    ]
