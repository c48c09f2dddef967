"""Budget periods in UTC."""
from datetime import datetime, timedelta, timezone


def period_start(now: datetime, period: str) -> datetime:
    now = now.astimezone(timezone.utc)
    if period == "day":
        return now.replace(hour=0, minute=0, second=0, microsecond=0)
    return now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def period_end(start: datetime, period: str) -> datetime:
    if period == "day":
        return start + timedelta(days=1)
    return (start.replace(day=28) + timedelta(days=4)).replace(day=1)
