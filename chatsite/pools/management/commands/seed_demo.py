from django.core.management.base import BaseCommand

from chatsite.pools.demo import DEMO_PASSWORD, DEMO_USER, demo_seed


class Command(BaseCommand):
    help = "Create the demo tenant, the demo user and the flagship/small pools (idempotent)."

    def handle(self, *args, **opts):
        result = demo_seed()
        self.stdout.write(f"tenant {result['tenant']}, user {DEMO_USER} / {DEMO_PASSWORD}, "
                          f"pools {', '.join(p.name for p in result['pools'])}")
