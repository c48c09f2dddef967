"""Writes for generation runs on the worker's side and around them: claim, finalize,
cancel. Admission is the door's: chatsite.runs.admission."""
from chatsite.runs.services.cancel import run_cancel
from chatsite.runs.services.claim import Claim, run_claim, run_release
from chatsite.runs.services.finalize import run_end, run_finalize

__all__ = ["run_cancel", "Claim", "run_claim", "run_release", "run_finalize", "run_end"]
