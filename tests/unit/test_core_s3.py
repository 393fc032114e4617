"""S3 URIs split into bucket and prefix (`gpufarm.core.s3`)."""

from __future__ import annotations

import pytest

from gpufarm.core.s3 import split_s3_uri


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("s3://bucket", ("bucket", "")),
        ("s3://bucket/", ("bucket", "")),
        ("s3://bucket/models", ("bucket", "models/")),
        ("s3://bucket/models/", ("bucket", "models/")),
        ("s3://bucket/a/b/c", ("bucket", "a/b/c/")),
        ("s3://my.bucket-1/Qwen/Qwen3-8B/", ("my.bucket-1", "Qwen/Qwen3-8B/")),
    ],
)
def test_split_s3_uri(uri: str, expected: tuple[str, str]) -> None:
    assert split_s3_uri(uri) == expected
