"""What a Responses API call asked for beyond what its run records.

A response is a run (id `resp_<run id>`) and its chat; this row holds only what the
response object echoes and the run cannot: the call's `instructions` as sent, its
`metadata`, whether it ran in the background, and the response it continued. Its
presence also marks the run as a response: a chat completion's run is not one."""
from django.db import models


class ResponseRecord(models.Model):
    run = models.OneToOneField("runs.GenerationRun", on_delete=models.CASCADE, primary_key=True,
                               related_name="response_record")
    instructions = models.TextField(null=True, blank=True, help_text="As sent; null when none were.")
    metadata = models.JSONField(default=dict, blank=True, help_text="Up to 16 string pairs, echoed.")
    background = models.BooleanField(default=False)
    previous_run = models.ForeignKey("runs.GenerationRun", null=True, blank=True, on_delete=models.SET_NULL,
                                     related_name="+", help_text="The response this one continued.")

    def __str__(self) -> str:
        return f"resp_{self.run_id}"
