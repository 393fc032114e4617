"""Synth warns on a stack whose Kubernetes version is in, or near, EKS extended support."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from aws_cdk import cx_api

from gpufarm.app import SUPPORT_WARNING_ID, build_app, support_warning
from gpufarm.config import load_preset
from tests.conftest import cdk_context


def test_a_stack_in_extended_support_carries_the_warning(tmp_path: Path) -> None:
    poc = load_preset("poc")
    day = dt.date(2027, 3, 27)  # 1.35 leaves standard support
    app = build_app([poc], context=cdk_context(), outdir=str(tmp_path), day=day)
    stack = app.synth().get_stack_by_name(poc.stack_name)
    warnings = [
        str(m.entry.data)
        for m in stack.messages
        if m.level == cx_api.SynthesisMessageLevel.WARNING
        and m.id == f"/{poc.stack_name}"
        and f"[ack: {SUPPORT_WARNING_ID}]" in str(m.entry.data)
    ]
    expected = support_warning(poc, day)
    assert expected is not None
    assert expected.startswith(
        "Kubernetes 1.35 is in EKS extended support (standard support ended 2027-03-27"
    )
    assert warnings == [f"{expected} [ack: {SUPPORT_WARNING_ID}]"]


def test_no_warning_far_from_the_end_of_standard_support() -> None:
    assert support_warning(load_preset("poc"), dt.date(2026, 12, 1)) is None
    assert support_warning(load_preset("enterprise"), dt.date(2027, 1, 25)) is None  # 61 days left


def test_the_warning_starts_60_days_before_extended_support() -> None:
    warning = support_warning(load_preset("production"), dt.date(2027, 1, 26))
    assert warning is not None
    assert warning.startswith("Kubernetes 1.35 leaves EKS standard support on 2027-03-27 (in 60 days)")
