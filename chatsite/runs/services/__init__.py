"""Writes for generation runs: admission, claim, finalize, cancel."""
from chatsite.runs.services.admission import run_submit
from chatsite.runs.services.cancel import run_cancel
from chatsite.runs.services.claim import Claim, run_claim, run_release
from chatsite.runs.services.finalize import run_end, run_finalize

__all__ = ["run_submit", "run_cancel", "Claim", "run_claim", "run_release", "run_finalize", "run_end"]
