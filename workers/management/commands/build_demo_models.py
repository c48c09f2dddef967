"""Train the two demo models (flagship and small) if they are not cached yet."""
from django.conf import settings
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Train the demo models on pydoc_data text (deterministic; skipped when already built)."

    def add_arguments(self, parser):
        parser.add_argument("--root", default=None, help="Folder to build into (default: CHATSITE_DEMO_MODELS_DIR).")
        parser.add_argument("--only", choices=["flagship", "small"], default=None)

    def handle(self, *args, root=None, only=None, **opts):
        from pathlib import Path

        from inference.demo_models import build_demo_models

        root = Path(root) if root else settings.CHATSITE["DEMO_MODELS_DIR"]
        names = (only,) if only else ("flagship", "small")
        paths = build_demo_models(root, names=names, log=lambda line: self.stdout.write(line))
        for name, path in paths.items():
            self.stdout.write(self.style.SUCCESS(f"{name}: {path}"))
