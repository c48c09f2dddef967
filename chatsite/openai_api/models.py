"""What a Responses API call asked for beyond what its run records.

A response is a run (id `resp_<run id>`) and its chat; this row holds only what the
response object echoes and the run cannot: the call's `instructions` as sent, its
`metadata`, whether it ran in the background, the response it continued, its tools
and text format as sent (`options`), and whether it is stored. Its presence also marks
the run as a response: a chat completion's run is not one."""
from django.db import models


class ResponseRecord(models.Model):
    run = models.OneToOneField("runs.GenerationRun", on_delete=models.CASCADE, primary_key=True,
                               related_name="response_record")
    instructions = models.TextField(null=True, blank=True, help_text="As sent; null when none were.")
    metadata = models.JSONField(default=dict, blank=True, help_text="Up to 16 string pairs, echoed.")
    background = models.BooleanField(default=False)
    previous_run = models.ForeignKey("runs.GenerationRun", null=True, blank=True, on_delete=models.SET_NULL,
                                     related_name="+", help_text="The response this one continued.")
    options = models.JSONField(default=dict, blank=True,
                               help_text="tools, tool_choice, parallel_tool_calls and text, as the response echoes them.")
    stored = models.BooleanField(default=True, help_text="False for store: false: not readable once answered, and "
                                                        "its text forgotten (forgotten_at).")
    forgotten_at = models.DateTimeField(null=True, blank=True,
                                        help_text="When an unstored response's text was erased, after its end.")

    def __str__(self) -> str:
        return f"resp_{self.run_id}"
