"""Cron schedules in Europe/Amsterdam across the clock changes (last Sunday of March and of October)."""
from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

import pytest

from edge_agent.jobs.schedule import next_run

AMS = ZoneInfo("Europe/Amsterdam")


def runs(expr: str, start: dt.datetime, n: int) -> list[str]:
    """The next n run times as Amsterdam wall-clock strings with their offset."""
    out, t = [], start.timestamp()
    for _ in range(n):
        t = next_run(expr, "Europe/Amsterdam", t)
        out.append(dt.datetime.fromtimestamp(t, AMS).strftime("%m-%d %H:%M%z"))
    return out


def test_a_nightly_job_runs_once_on_the_night_the_clock_goes_back():
    """On 2026-10-25 02:00-03:00 happens twice; a job at 02:00 or 02:30 runs in the first of them only (as cron does)."""
    start = dt.datetime(2026, 10, 24, 12, tzinfo=AMS)
    assert runs("0 2 * * *", start, 3) == ["10-25 02:00+0200", "10-26 02:00+0100", "10-27 02:00+0100"]
    assert runs("30 2 * * 0", start, 2) == ["10-25 02:30+0200", "11-01 02:30+0100"]


def test_an_hourly_job_runs_in_both_repeated_hours():
    """'Every hour' means every hour that passes, the repeated one included."""
    start = dt.datetime(2026, 10, 25, 1, 30, tzinfo=AMS)
    assert runs("0 * * * *", start, 3) == ["10-25 02:00+0200", "10-25 02:00+0100", "10-25 03:00+0100"]


def test_a_nightly_job_in_the_skipped_hour_runs_when_the_clock_goes_forward():
    """On 2027-03-28 02:30 does not exist: the job runs at 03:00 that night, not never and not twice."""
    start = dt.datetime(2027, 3, 27, 12, tzinfo=AMS)
    assert runs("30 2 * * *", start, 3) == ["03-28 03:00+0200", "03-29 02:30+0200", "03-30 02:30+0200"]


def test_a_deadline_says_which_zone_it_is_in():
    """'--deadline 06:00' was read in jobs_timezone (UTC unless set) while the CLI shows local times, with no way to say
    which zone was meant: a zone or offset may follow the time, and deadline_zone names the one used."""
    import pytest

    from edge_agent.jobs.kinds import InvalidJobError
    from edge_agent.jobs.schedule import deadline_at, deadline_zone, iso_in

    start = dt.datetime(2026, 12, 1, 20, 0, tzinfo=dt.timezone.utc).timestamp()
    cases = {
        "06:00": ("Asia/Tokyo", "2026-12-02T06:00:00+09:00"),  # no zone of its own: the job's (here Tokyo)
        "06:00 Europe/Amsterdam": ("Europe/Amsterdam", "2026-12-02T06:00:00+01:00"),
        "06:00+01:00": ("+01:00", "2026-12-02T06:00:00+01:00"),
        "06:00Z": ("UTC", "2026-12-02T06:00:00+00:00"),
        "2026-12-02T06:00:00-05:00": ("-05:00", "2026-12-02T06:00:00-05:00"),
    }
    for value, (zone, local) in cases.items():
        assert deadline_zone(value, "Asia/Tokyo") == zone, value
        assert iso_in(deadline_at(value, "Asia/Tokyo", start), zone) == local, value
    with pytest.raises(InvalidJobError, match="unknown time zone 'Mars/Olympus'"):
        deadline_at("06:00 Mars/Olympus", "UTC", start)


def test_a_deadline_in_the_skipped_hour_is_when_the_clock_jumps_past_it():
    """A deadline of 02:30 on the night the clock goes forward fell at 03:30 (Python reads a time that never shows with
    the old offset): half an hour past the moment the wall clock passed 02:30, which is 03:00, when a schedule at that
    time runs. Other nights, and the night the clock goes back, keep their time."""
    from edge_agent.jobs.schedule import deadline_at

    def deadline(value: str, start: str) -> str:
        t = dt.datetime.fromisoformat(start).replace(tzinfo=AMS).timestamp()
        return dt.datetime.fromtimestamp(deadline_at(value, "Europe/Amsterdam", t), AMS).strftime("%m-%d %H:%M:%S%z")

    assert deadline("02:30", "2026-03-29T00:30") == "03-29 03:00:00+0200"
    assert deadline("02:59", "2026-03-29T00:30") == "03-29 03:00:00+0200"
    assert deadline("01:59", "2026-03-29T00:30") == "03-29 01:59:00+0100"
    assert deadline("03:00", "2026-03-29T00:30") == "03-29 03:00:00+0200"
    assert deadline("02:30", "2026-10-25T00:30") == "10-25 02:30:00+0200"  # the first of the two 02:30s
    assert deadline("06:00", "2026-03-28T12:00") == "03-29 06:00:00+0200"


@pytest.mark.parametrize("expr, named", [("61 * * * *", "minute field '61'"), ("0 25 * * *", "hour field '25'"),
                                         ("0 2 32 * *", "day of the month field '32'"), ("0 2 * 13 *", "month field '13'"),
                                         ("0 2 * * mon-fry", "weekday field 'mon-fry'")])
def test_a_bad_cron_field_is_named_with_its_values(expr, named):
    """'bad cron expression' alone left the operator counting fields; the field and its values say what to change."""
    from edge_agent.jobs.kinds import InvalidJobError
    from edge_agent.jobs.schedule import check_cron

    with pytest.raises(InvalidJobError) as e:
        check_cron(expr, "UTC")
    assert named in str(e.value) and "is not valid (values " in str(e.value), str(e.value)


def test_fields_valid_alone_but_never_together_get_the_general_example():
    from edge_agent.jobs.kinds import InvalidJobError
    from edge_agent.jobs.schedule import check_cron

    with pytest.raises(InvalidJobError) as e:
        check_cron("0 2 31 2 *", "UTC")  # the 31st of February
    assert "matches no date" in str(e.value)
