"""Feedback on a reply: thumbs up or down, and an optional comment."""
from chatsite.errors import InvalidInput
from chatsite.runs.models import GenerationRun, ReplyFeedback
from chatsite.runs.services.finalize import run_finalize_if_ended
from chatsite.text import clean_text

MAX_COMMENT_CHARS = 2000


def feedback_give(*, run: GenerationRun, user, rating, comment="") -> ReplyFeedback:
    """Record what `user` (who asked: the run's chat is theirs) thinks of the run's reply;
    given again, it replaces the earlier one. Raises InvalidInput for a rating other than
    "up" or "down", a comment that is not text or longer than MAX_COMMENT_CHARS, and a run
    still generating (its reply is not there to judge yet)."""
    if rating not in ReplyFeedback.Rating.values:
        raise InvalidInput('rating must be "up" or "down"', field="rating")
    comment = clean_text("" if comment is None else comment, field="comment", max_chars=MAX_COMMENT_CHARS,
                         allow_empty=True).strip()
    # A reply whose end reached the page before its worker saved it is saved here (as the door saves one).
    if not run.is_terminal and not run_finalize_if_ended(run_id=run.pk):
        raise InvalidInput("the reply is still being written; rate it once it has ended", field="run")
    feedback, _ = ReplyFeedback.objects.update_or_create(
        run=run, defaults={"tenant_id": run.tenant_id, "user": user, "rating": rating, "comment": comment})
    return feedback


def feedback_withdraw(*, run: GenerationRun) -> None:
    """Forget the feedback on the run's reply, if any (idempotent)."""
    ReplyFeedback.objects.filter(run=run).delete()
