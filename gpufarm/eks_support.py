"""The Amazon EKS support calendar: where a Kubernetes version stands on a given day.

The calendar ships as `gpufarm/data/eks_support.yaml` (dated, with its source). A minor version
is in standard support for 14 months, then in extended support for 12 more, billed at a higher
rate per cluster hour; after that EKS upgrades the cluster itself. Synth (a warning on the
stack), `gpufarm preflight` and `gpufarm cost` use :func:`support_status` with the same
:data:`WARN_DAYS`. Nothing here calls AWS, and every function takes the day to judge, so no
result depends on when it runs unless the caller asks for :func:`today`.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from importlib import resources
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

WARN_DAYS = 60
"""A version within this many days of leaving standard support is flagged."""


class SupportCalendarError(ValueError):
    """The support calendar cannot be read or does not have its shape."""


class VersionDates(BaseModel):
    """The support dates of one Kubernetes minor version on EKS."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    standard_support_end: dt.date = Field(description="Day standard support ends (extended support starts).")
    extended_support_end: dt.date = Field(description="Day extended support ends (EKS upgrades the cluster).")


class SupportCalendar(BaseModel):
    """Each version's standard- and extended-support end dates, with the calendar's source and date."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    as_of: dt.date = Field(description="Date the calendar was read.")
    source: str = Field(min_length=1, description="Page the dates come from.")
    versions: dict[str, VersionDates] = Field(description="Dates by 'major.minor' version.")


class Phase(StrEnum):
    """Where a version stands on a given day."""

    STANDARD = "standard"
    """In standard support, more than :data:`WARN_DAYS` days from its end."""
    ENDING = "ending"
    """In standard support, leaving it within :data:`WARN_DAYS` days (inclusive)."""
    EXTENDED = "extended"
    """In extended support: the cluster bills at the extended-support rate."""
    ENDED = "ended"
    """Past extended support: EKS upgrades the cluster to a supported version."""
    UNKNOWN = "unknown"
    """Not in the calendar."""


@dataclass(frozen=True, kw_only=True)
class SupportStatus:
    """Where `version` stands on `day`, and what to tell the user about it."""

    version: str
    day: dt.date
    phase: Phase
    standard_support_end: dt.date | None = None
    extended_support_end: dt.date | None = None

    @property
    def extended_billing(self) -> bool:
        """True when the cluster bills at the extended-support rate on `day`."""
        return self.phase is Phase.EXTENDED

    @property
    def days_to_extended(self) -> int | None:
        """Days from `day` until extended support starts (0 or less once it has)."""
        if self.standard_support_end is None:
            return None
        return (self.standard_support_end - self.day).days

    def warning(self) -> str | None:
        """One sentence for the user when the version is in extended support or within
        :data:`WARN_DAYS` days of it; None otherwise (and for versions not in the calendar)."""
        fix = "set cluster.kubernetes_version to a version in standard support and upgrade the cluster"
        if self.phase is Phase.ENDING:
            return (
                f"Kubernetes {self.version} leaves EKS standard support on {self.standard_support_end} "
                f"(in {self.days_to_extended} days); the cluster then bills at the extended-support "
                f"rate per cluster hour: {fix}"
            )
        if self.phase is Phase.EXTENDED:
            return (
                f"Kubernetes {self.version} is in EKS extended support (standard support ended "
                f"{self.standard_support_end}, extended support ends {self.extended_support_end}); "
                f"the cluster bills at the extended-support rate per cluster hour: {fix}"
            )
        if self.phase is Phase.ENDED:
            return (
                f"Kubernetes {self.version} is past EKS extended support (ended "
                f"{self.extended_support_end}); EKS upgrades such clusters itself: {fix}"
            )
        return None


def shipped_calendar_path() -> Path:
    """Path of the support calendar shipped with gpufarm."""
    return Path(str(resources.files("gpufarm") / "data" / "eks_support.yaml"))


def load_calendar(path: str | Path | None = None) -> SupportCalendar:
    """The support calendar at `path` (default: the shipped one); raises SupportCalendarError."""
    if path is None:
        return _shipped()
    return _load(Path(path))


@cache
def _shipped() -> SupportCalendar:
    return _load(shipped_calendar_path())


def _load(path: Path) -> SupportCalendar:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SupportCalendarError(
            f"cannot read the support calendar {str(path)!r}: {exc.strerror}"
        ) from None
    except yaml.YAMLError as exc:
        raise SupportCalendarError(f"the support calendar {str(path)!r} is not valid YAML: {exc}") from None
    try:
        return SupportCalendar.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(top)'}: {err['msg']}" for err in exc.errors()
        )
        raise SupportCalendarError(f"{str(path)!r} is not a valid support calendar: {problems}") from None


def today() -> dt.date:
    """Today's date in UTC: the day synth, preflight and cost judge by unless given one."""
    return dt.datetime.now(dt.UTC).date()


def support_status(version: str, day: dt.date, calendar: SupportCalendar | None = None) -> SupportStatus:
    """Where `version` stands on `day` in `calendar` (default: the shipped calendar)."""
    calendar = calendar or load_calendar()
    dates = calendar.versions.get(version)
    if dates is None:
        return SupportStatus(version=version, day=day, phase=Phase.UNKNOWN)
    if day >= dates.extended_support_end:
        phase = Phase.ENDED
    elif day >= dates.standard_support_end:
        phase = Phase.EXTENDED
    elif (dates.standard_support_end - day).days <= WARN_DAYS:
        phase = Phase.ENDING
    else:
        phase = Phase.STANDARD
    return SupportStatus(
        version=version,
        day=day,
        phase=phase,
        standard_support_end=dates.standard_support_end,
        extended_support_end=dates.extended_support_end,
    )
