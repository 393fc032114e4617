"""Kubernetes name shapes, defined once for the config, the manifests and the constructs.

Kubernetes names objects with two kinds of DNS label (kubernetes.io/docs/concepts/overview/
working-with-objects/names, "RFC 1123 Label Names" and "RFC 1035 Label Names"; the formats are
apimachinery's `dns1123LabelFmt` and `dns1035LabelFmt`, k8s.io/apimachinery/pkg/util/validation):
at most 63 characters of lowercase alphanumerics and '-', starting and ending with an
alphanumeric; a DNS-1035 label must also start with a letter. Namespaces are DNS-1123 labels.
"""

from __future__ import annotations

import re

MAX_LABEL_LENGTH = 63
"""Longest DNS label."""

DNS_1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
"""A DNS-1123 label (use with `fullmatch`; the length is :data:`MAX_LABEL_LENGTH`)."""

DNS_1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
"""A DNS-1035 label: a DNS-1123 label that starts with a letter (use with `fullmatch`)."""


def is_dns_1123_label(value: str, *, max_length: int = MAX_LABEL_LENGTH) -> bool:
    """Whether `value` is a DNS-1123 label (a namespace name) of at most `max_length` characters."""
    return len(value) <= max_length and DNS_1123_LABEL.fullmatch(value) is not None


def is_dns_1035_label(value: str, *, max_length: int = MAX_LABEL_LENGTH) -> bool:
    """Whether `value` is a DNS-1035 label of at most `max_length` characters."""
    return len(value) <= max_length and DNS_1035_LABEL.fullmatch(value) is not None
