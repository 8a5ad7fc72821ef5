"""Cron schedules with a time zone (croniter for the date arithmetic), deadlines, and the daemon's cron loop.

A job's next run time is kept in SQLite (jobs.next_run_at). The loop starts a run when that time
has passed and moves it to the next time after *now*, not after the missed one: runs missed while
the machine was off are coalesced into one run at start-up. Moving the time is a compare-and-set
(JobStore.claim_schedule), so two processes never both start the same scheduled run.
"""
from __future__ import annotations

import datetime as dt
import logging
import re
import threading
from collections.abc import Callable
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadDateError, croniter

from edge_agent.jobs.kinds import InvalidJobError

log = logging.getLogger(__name__)

TICK_S = 1.0
# 'HH:MM', optionally followed by the zone it is in: 'Z', 'UTC', an offset ('+01:00') or an IANA name
_TIME_OF_DAY = re.compile(r"^([01]?\d|2[0-3]):([0-5]\d)\s*(\S*)$")
_OFFSET = re.compile(r"^([+-])([01]\d|2[0-3]):?([0-5]\d)$")


def zone(name: str | None, param: str = "schedule.timezone") -> ZoneInfo:
    """The IANA time zone; raises InvalidJobError for an unknown name."""
    name = name or "UTC"
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise InvalidJobError(f"unknown time zone {name!r}: use an IANA name such as 'Europe/Amsterdam' or 'UTC'",
                              param=param) from None


def check_cron(expr: str, tz: str | None) -> tuple[str, str]:
    """The normalised (cron, timezone); raises InvalidJobError for a bad expression or zone."""
    if not isinstance(expr, str) or not expr.strip():
        raise InvalidJobError("schedule.cron must be a cron expression such as '0 2 * * *'", param="schedule.cron")
    expr = " ".join(expr.split())
    fields = expr.split(" ")
    if len(fields) != 5 and not expr.startswith("@"):
        raise InvalidJobError(f"bad cron expression {expr!r}: give five fields (minute hour day month weekday), "
                              "e.g. '0 2 * * *' for 02:00 every day", param="schedule.cron")
    if not croniter.is_valid(expr):
        raise InvalidJobError(f"bad cron expression {expr!r}: " + (_bad_field(fields) or "e.g. '0 2 * * *' is 02:00 every "
                              "day, '*/15 * * * *' every quarter hour"), param="schedule.cron")
    try:  # valid fields that never meet (the 31st of February): croniter gives up searching with an error
        croniter(expr, dt.datetime.now(zone(tz))).get_next(dt.datetime)
    except CroniterBadDateError:
        raise InvalidJobError(f"bad cron expression {expr!r}: it matches no date (such as the 31st of February); "
                              "e.g. '0 2 * * *' is 02:00 every day", param="schedule.cron") from None
    return expr, tz or "UTC"


_FIELDS = (("minute", "0-59"), ("hour", "0-23"), ("day of the month", "1-31"), ("month", "1-12 or jan-dec"),
           ("weekday", "0-7 or sun-sat"))


def _bad_field(fields: list[str]) -> str:
    """"its hour field '25' is not valid (values 0-23, ...)" for the first of five fields croniter refuses alone ('' if none
    does: each is valid, together they are not)."""
    if len(fields) != 5:
        return ""
    for i, (name, span) in enumerate(_FIELDS):
        alone = ["*"] * 5
        alone[i] = fields[i]
        if not croniter.is_valid(" ".join(alone)):
            return f"its {name} field {fields[i]!r} is not valid (values {span}, lists a,b, ranges a-b, steps */n)"
    return ""


def next_run(expr: str, tz: str | None, after: float) -> float:
    """The first time (epoch s) strictly after `after` that matches the expression in the zone.

    When the clock goes back (Europe/Amsterdam: 03:00 -> 02:00 on the last Sunday of October) a job at
    fixed hours runs in the first of the repeated hours only, as cron does: a nightly job at 02:30 runs
    once that night. A job whose hour field is every hour runs in both.
    """
    start = dt.datetime.fromtimestamp(after, zone(tz))
    it = croniter(expr, start)
    hours = croniter.expand(expr)[0][1]
    every_hour = hours == ["*"] or len(hours) == 24
    while True:
        when = it.get_next(dt.datetime)
        first = when.replace(tzinfo=None).replace(tzinfo=when.tzinfo, fold=0)  # the wall-clock time's first occurrence
        if every_hour or first.timestamp() >= when.timestamp():
            return float(when.timestamp())


def time_zone(label: str | None, param: str = "limits.deadline") -> dt.tzinfo:
    """A zone given as an IANA name, 'UTC'/'Z' or an offset ('+01:00', '-0500'); raises InvalidJobError."""
    m = _OFFSET.match(label or "")
    if m:
        sign = 1 if m.group(1) == "+" else -1
        return dt.timezone(sign * dt.timedelta(hours=int(m.group(2)), minutes=int(m.group(3))))
    return zone("UTC" if label in (None, "", "Z", "z") else label, param=param)


def deadline_zone(value: str | float | int | None, tz: str | None) -> str | None:
    """The zone a deadline is read in, as the run shows it: the zone or offset written with it, else tz (the job's
    schedule zone or jobs_timezone), 'UTC' for epoch seconds; None without a deadline."""
    if value is None:
        return None
    if isinstance(value, str):
        m = _TIME_OF_DAY.match(value.strip())
        if m:
            return ("UTC" if m.group(3) in ("Z", "z") else m.group(3)) or tz or "UTC"
        try:
            parsed = dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            return tz or "UTC"
        if parsed.tzinfo is not None:
            off = parsed.utcoffset() or dt.timedelta(0)
            return "UTC" if not off else f"{'+' if off >= dt.timedelta(0) else '-'}{abs(off) // dt.timedelta(hours=1):02d}:" \
                f"{abs(off) % dt.timedelta(hours=1) // dt.timedelta(minutes=1):02d}"
        return tz or "UTC"
    return "UTC"


def deadline_at(value: str | float | int | None, tz: str | None, start: float, param: str = "limits.deadline") -> float | None:
    """A run's deadline (epoch s) from 'HH:MM' (the next such time in the zone written after it, e.g. '06:00
    Europe/Amsterdam' or '06:00+01:00', else in tz), an ISO date-time (naive: in tz) or epoch seconds.

    Raises InvalidJobError for anything else, an unknown zone or a time in the past.
    """
    if value is None:
        return None
    if isinstance(value, bool):
        raise InvalidJobError("deadline must be 'HH:MM' (optionally with a zone), an ISO date-time or epoch seconds", param=param)
    m = _TIME_OF_DAY.match(value.strip()) if isinstance(value, str) else None
    if isinstance(value, (int, float)):
        when = float(value)
    elif m:
        h, mi = int(m.group(1)), int(m.group(2))
        local = dt.datetime.fromtimestamp(start, time_zone(deadline_zone(value, tz), param))
        target = local.replace(hour=h, minute=mi, second=0, microsecond=0)
        if target.timestamp() <= start:
            target = (local + dt.timedelta(days=1)).replace(hour=h, minute=mi, second=0, microsecond=0)
        return _wall_clock_passes(target)
    elif isinstance(value, str):
        try:
            parsed = dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise InvalidJobError(f"bad deadline {value!r}: give 'HH:MM' (e.g. '06:00', '06:00 Europe/Amsterdam', "
                                  "'06:00+01:00'), an ISO date-time or epoch seconds", param=param) from None
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=zone(tz))
        when = parsed.timestamp()
    else:
        raise InvalidJobError("deadline must be 'HH:MM' (optionally with a zone), an ISO date-time or epoch seconds", param=param)
    if when <= start:
        raise InvalidJobError("the deadline is in the past", param=param)
    if not when < start + MAX_AHEAD_S:  # also NaN and infinity
        raise InvalidJobError("the deadline is more than a year away; give 'HH:MM' or a date within a year", param=param)
    return when


def _wall_clock_passes(target: dt.datetime) -> float:
    """When a zone's clock shows `target` (epoch s): on the night the clock skips it (02:30 in Europe/Amsterdam on the
    last Sunday of March) the moment it jumps past it, 03:00, as a schedule at that time runs then. Python reads the
    time that never shows with the old offset, which gave a deadline of 02:30 at 03:30 local, half an hour late."""
    when = target.timestamp()
    shown = dt.datetime.fromtimestamp(when, target.tzinfo)
    jump = (shown.replace(tzinfo=None) - target.replace(tzinfo=None)).total_seconds()
    if jump <= 0:
        return float(when)
    lo, hi = int(when - jump), int(when)  # the clock jumps in between: find the second its offset changes
    before = dt.datetime.fromtimestamp(lo, target.tzinfo).utcoffset()
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if dt.datetime.fromtimestamp(mid, target.tzinfo).utcoffset() == before:
            lo = mid
        else:
            hi = mid
    return float(hi)


MAX_AHEAD_S = 366 * 86400  # a run's deadline or duration: within a year


def iso(ts: float | None) -> str | None:
    """Epoch seconds as an ISO 8601 UTC string."""
    return None if ts is None else dt.datetime.fromtimestamp(ts, dt.timezone.utc).isoformat(timespec="seconds")


def iso_in(ts: float | None, label: str | None) -> str | None:
    """Epoch seconds as an ISO 8601 string in a zone (time_zone's forms), e.g. '2026-12-02T06:00:00+01:00'."""
    if ts is None:
        return None
    try:
        tz = time_zone(label)
    except InvalidJobError:
        tz = dt.timezone.utc
    return dt.datetime.fromtimestamp(ts, tz).isoformat(timespec="seconds")


class FailureStreak:
    """Failures in a row of a background loop: it never gives up, it waits longer between tries.

    The n-th failure in a row waits min(RETRY_MAX_S, base * 2 ** (n - 1)) before the next try (a database locked
    by a backup for minutes, an NFS data dir that hangs: the loop tried ten times in ten seconds and then ended for
    good, so nightly runs stopped until someone restarted the daemon). From FAILING_AFTER in a row the loop counts
    as failing (readiness shows it) until a try succeeds.
    """

    def __init__(self, name: str, on_failing: Callable[[BaseException], None], on_recovered: Callable[[], None]):
        self.name = name
        self.count = 0
        self._on_failing = on_failing
        self._on_recovered = on_recovered

    def failed(self, e: BaseException, base_s: float) -> float:
        """Record a failure; the seconds to wait before the next try."""
        self.count += 1
        wait = min(RETRY_MAX_S, base_s * 2 ** min(self.count - 1, 30))
        if self.count <= FAILING_AFTER or self.count % FAILING_AFTER == 0:  # not a traceback every minute for days
            log.error("%s failed (%d in a row); next try in %.0f s", self.name, self.count, wait, exc_info=e)
        if self.count >= FAILING_AFTER:
            self._on_failing(e)
        return wait

    def succeeded(self) -> None:
        if self.count >= FAILING_AFTER:
            log.warning("%s works again after %d failures in a row", self.name, self.count)
            self._on_recovered()
        self.count = 0


FAILING_AFTER = 10
RETRY_MAX_S = 60.0


class CronLoop:
    """A thread that calls tick(now) every TICK_S; tick starts the runs that are due (see JobsService.tick)."""

    def __init__(self, tick: Callable[[float], list], stopping: threading.Event, streak: FailureStreak):
        self._tick = tick
        self._stopping = stopping
        self.streak = streak
        self.thread = threading.Thread(target=self._loop, name="edge-agent-cron", daemon=True)

    def start(self) -> "CronLoop":
        self.thread.start()
        return self

    def _loop(self) -> None:
        import time

        while not self._stopping.is_set():
            wait = TICK_S
            try:
                self._tick(time.time())
                self.streak.succeeded()
            except Exception as e:  # a locked database for a moment: tried again, later and later
                wait = self.streak.failed(e, TICK_S)
            self._stopping.wait(wait)
