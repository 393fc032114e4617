"""The EKS support calendar: phases by date, the warning text, the shipped data and bad files."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from gpufarm.config import load_preset, preset_names
from gpufarm.config.validate import SUPPORTED_KUBERNETES_VERSIONS
from gpufarm.eks_support import (
    WARN_DAYS,
    Phase,
    SupportCalendar,
    SupportCalendarError,
    VersionDates,
    load_calendar,
    support_status,
)

D = dt.date
CALENDAR = SupportCalendar(
    as_of=D(2026, 12, 1),
    source="test",
    versions={"1.34": VersionDates(standard_support_end=D(2026, 12, 2), extended_support_end=D(2027, 12, 2))},
)


@pytest.mark.parametrize(
    ("day", "phase", "days_to_extended"),
    [
        (D(2026, 10, 2), Phase.STANDARD, 61),
        (D(2026, 10, 3), Phase.ENDING, WARN_DAYS),
        (D(2026, 12, 1), Phase.ENDING, 1),
        (D(2026, 12, 2), Phase.EXTENDED, 0),
        (D(2027, 12, 1), Phase.EXTENDED, -364),
        (D(2027, 12, 2), Phase.ENDED, -365),
    ],
)
def test_the_phase_follows_the_dates(day: dt.date, phase: Phase, days_to_extended: int) -> None:
    status = support_status("1.34", day, CALENDAR)
    assert (status.phase, status.days_to_extended) == (phase, days_to_extended)
    assert status.extended_billing is (phase is Phase.EXTENDED)


def test_no_warning_in_standard_support_or_for_a_version_not_in_the_calendar() -> None:
    assert support_status("1.34", D(2026, 10, 2), CALENDAR).warning() is None
    unknown = support_status("1.36", D(2026, 12, 1), CALENDAR)
    assert (unknown.phase, unknown.warning(), unknown.days_to_extended) == (Phase.UNKNOWN, None, None)


def test_the_warnings_say_when_and_what_to_do() -> None:
    fix = "set cluster.kubernetes_version to a version in standard support and upgrade the cluster"
    assert support_status("1.34", D(2026, 11, 2), CALENDAR).warning() == (
        "Kubernetes 1.34 leaves EKS standard support on 2026-12-02 (in 30 days); the cluster then "
        f"bills at the extended-support rate per cluster hour: {fix}"
    )
    assert support_status("1.34", D(2026, 12, 2), CALENDAR).warning() == (
        "Kubernetes 1.34 is in EKS extended support (standard support ended 2026-12-02, extended "
        f"support ends 2027-12-02); the cluster bills at the extended-support rate per cluster hour: {fix}"
    )
    assert support_status("1.34", D(2028, 1, 1), CALENDAR).warning() == (
        "Kubernetes 1.34 is past EKS extended support (ended 2027-12-02); EKS upgrades such clusters "
        f"itself: {fix}"
    )


def test_the_shipped_calendar_gives_twelve_months_of_extended_support_after_fourteen_of_standard() -> None:
    calendar = load_calendar()
    assert calendar.source.startswith("https://docs.aws.amazon.com/eks/")
    assert {"1.34", "1.35"} <= set(calendar.versions)
    for version, dates in calendar.versions.items():
        end = dates.standard_support_end
        assert dates.extended_support_end == end.replace(year=end.year + 1), version


def test_the_shipped_calendar_has_the_1_34_date_the_issue_names() -> None:
    assert load_calendar().versions["1.34"].standard_support_end == D(2026, 12, 2)


@pytest.mark.parametrize("tier", preset_names())
def test_every_preset_was_in_standard_support_when_the_calendar_was_read(tier: str) -> None:
    """Judged on the calendar's own date, so the test does not move with the clock."""
    calendar = load_calendar()
    version = load_preset(tier).cluster.kubernetes_version
    assert version in SUPPORTED_KUBERNETES_VERSIONS
    assert support_status(version, calendar.as_of).phase is Phase.STANDARD


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("as_of: [", "is not valid YAML"),
        (
            "as_of: 2026-12-01\nsource: x\nversions:\n  '1.35': {standard_support_end: 2027-03-27}\n",
            "is not a valid support calendar: versions.1.35.extended_support_end: Field required",
        ),
        (
            "as_of: 2026-12-01\nsource: x\nversion: {}\n",
            "is not a valid support calendar: versions: Field required; "
            "version: Extra inputs are not permitted",
        ),
    ],
)
def test_a_bad_calendar_file_is_refused_with_the_reason(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "calendar.yaml"
    path.write_text(text)
    with pytest.raises(SupportCalendarError) as info:
        load_calendar(path)
    assert message in str(info.value)
    assert str(path) in str(info.value)


def test_a_missing_calendar_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "absent.yaml"
    with pytest.raises(SupportCalendarError) as info:
        load_calendar(path)
    assert str(info.value) == f"cannot read the support calendar {str(path)!r}: No such file or directory"
