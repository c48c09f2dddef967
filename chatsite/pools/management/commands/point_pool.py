import json

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from chatsite.pools.models import ModelPool

FIELDS = ("model", "device", "context_length", "engine_args")


class Command(BaseCommand):
    help = ("Point a pool at model weights (a local folder), and optionally set its device, context length and "
            "engine arguments; checked as the admin checks them (ModelPool.clean). --check saves nothing.")

    def add_arguments(self, parser):
        parser.add_argument("--pool", required=True)
        parser.add_argument("--model", required=True, help="a folder with config.json, the tokenizer and weights")
        parser.add_argument("--device", choices=["cpu", "gpu"])
        parser.add_argument("--context-length", type=int)
        parser.add_argument("--engine-args", type=json.loads, help="a JSON object; replaces the pool's")
        parser.add_argument("--check", action="store_true", help="validate only")

    def handle(self, *args, pool, model, device, context_length, engine_args, check, **opts):
        row = ModelPool.objects.filter(name=pool).first()
        if row is None:
            raise CommandError(f"no pool named {pool!r} (create it in the admin, or `manage.py seed_demo`)")
        before = {f: getattr(row, f) for f in FIELDS}
        row.model = model
        row.device = device or row.device
        row.context_length = context_length or row.context_length
        row.engine_args = row.engine_args if engine_args is None else engine_args
        try:
            row.full_clean()
        except ValidationError as exc:
            raise CommandError("; ".join(f"{f}: {' '.join(m)}" for f, m in exc.message_dict.items())) from None
        for field in FIELDS:
            if getattr(row, field) != before[field]:
                self.stdout.write(f"{pool}.{field}: {before[field]!r} -> {getattr(row, field)!r}")
        if check:
            self.stdout.write(f"{pool}: the new settings pass the pool's checks (--check: nothing saved)")
            return
        row.save()  # the same row the admin's form saves; workers load it when they start
        self.stdout.write(f"{pool}: saved; restart its workers to load {model}")
