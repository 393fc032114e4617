"""moto with fake credentials, and the preflight row table the AWS-check tests compare."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from moto import mock_aws

from gpufarm.aws.preflight import CheckResult, Status


@contextmanager
def moto_account(monkeypatch: pytest.MonkeyPatch, region: str) -> Iterator[None]:
    """moto's account in `region`, reached with fake credentials (no real AWS call can escape)."""
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": region,
    }.items():
        monkeypatch.setenv(key, value)
    with mock_aws():
        yield


def table(rows: list[CheckResult]) -> dict[str, tuple[Status, str, str]]:
    """Preflight rows by subject: (status, message, fix)."""
    return {r.subject: (r.status, r.message, r.fix) for r in rows}
