"""Budget periods in UTC."""
from datetime import datetime, timedelta, timezone


def period_start(now: datetime, period: str) -> datetime:
    now = now.astimezone(timezone.utc)
    if period == "day":
        return now.replace(hour=0, minute=0, second=0, microsecond=0)
    return now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def period_start_sql(at: str, period: str) -> str:
    """period_start in SQL: the start of the period (`period`, an expression holding "day",
    or "month" or NULL for a month) in which the timestamptz expression `at` falls."""
    return f"(date_trunc(CASE WHEN {period} = 'day' THEN 'day' ELSE 'month' END, {at} AT TIME ZONE 'UTC') AT TIME ZONE 'UTC')"


def period_end(start: datetime, period: str) -> datetime:
    if period == "day":
        return start + timedelta(days=1)
    return (start.replace(day=28) + timedelta(days=4)).replace(day=1)
