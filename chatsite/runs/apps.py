from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "chatsite.runs"
    label = "runs"

    def ready(self):
        # A run's end starts its chat's queue (finalize cannot import the queue: see its docstring).
        from chatsite.runs.services import finalize
        from chatsite.runs.services.queued import advance

        finalize.queue_waiting.connect(advance.queue_start_next, sender=finalize.GenerationRun,
                                       dispatch_uid="runs.queue_start_next")
