"""The one definition of Kubernetes DNS labels (gpufarm.config.names)."""

from __future__ import annotations

import pytest

from gpufarm.config.names import MAX_LABEL_LENGTH, is_dns_1035_label, is_dns_1123_label


@pytest.mark.parametrize(
    ("value", "dns_1123", "dns_1035"),
    [
        ("inference", True, True),
        ("a", True, True),
        ("model-2", True, True),
        ("2models", True, False),  # DNS-1035 labels start with a letter
        ("9", True, False),
        ("-a", False, False),
        ("a-", False, False),
        ("Inference", False, False),
        ("a_b", False, False),
        ("a.b", False, False),
        ("", False, False),
        ("inference\n", False, False),  # fullmatch: no trailing newline slips past `$`
        ("a" * MAX_LABEL_LENGTH, True, True),
        ("a" * (MAX_LABEL_LENGTH + 1), False, False),
    ],
)
def test_dns_labels(value: str, dns_1123: bool, dns_1035: bool) -> None:
    assert (is_dns_1123_label(value), is_dns_1035_label(value)) == (dns_1123, dns_1035)


def test_a_shorter_limit_is_the_callers() -> None:
    assert MAX_LABEL_LENGTH == 63
    assert is_dns_1035_label("a" * 40, max_length=40)
    assert not is_dns_1035_label("a" * 41, max_length=40)
