"""The container images gpufarm runs, pinned by digest: one table, read once.

`gpufarm/data/images.yaml` keeps each image's repository, tag, digest, the date the digest was
read and where it was read. Every manifest builder and every Helm values dict takes its image
from here, as `repository:tag@sha256:...` (:func:`reference`) or as the chart's own image keys
(:func:`helm_tag`), so no digest is written twice. A row without a digest (no public record
confirmed one) yields the tag alone: the tier then has to supply the digest
(`images.digests.<name>` in the tier file), and until it does the tier is refused at deploy
(:mod:`gpufarm.config.image_pins`).
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
"""An OCI content digest as registries report it: `sha256:` and 64 lowercase hex digits."""

DIGEST_HINT = "'sha256:' followed by 64 lowercase hex digits"


@dataclass(frozen=True, kw_only=True)
class PinnedImage:
    """One row of the image table.

    `digest` is the multi-architecture index digest of `repository:tag`, or None when no public
    record confirmed it (`unconfirmed` says why). `chart` is the Helm chart release (`name@version`)
    whose values carry the image, or None for an image gpufarm writes into a manifest itself.
    """

    name: str
    repository: str
    tag: str
    digest: str | None
    read_on: datetime.date | None
    source: str | None
    unconfirmed: str | None
    chart: str | None

    def reference(self, digest: str | None = None) -> str:
        """`repository:tag@digest` with `digest` (default: the table's), or `repository:tag` without one."""
        digest = digest or self.digest
        return f"{self.repository}:{self.tag}@{digest}" if digest else f"{self.repository}:{self.tag}"

    def helm_tag(self, digest: str | None = None) -> str:
        """The value of a chart's `tag` key that pins the image: `tag@digest` (the charts build
        the image as `repository:tag`), or the tag alone without a digest."""
        digest = digest or self.digest
        return f"{self.tag}@{digest}" if digest else self.tag

    @property
    def chart_name(self) -> str | None:
        """The chart of `chart` without its version."""
        return self.chart.split("@", 1)[0] if self.chart else None

    @property
    def chart_version(self) -> str | None:
        """The chart version of `chart`."""
        return self.chart.split("@", 1)[1] if self.chart else None


class ImageTableError(ValueError):
    """The image table is malformed: the message names the row and the field."""


def table_path() -> Path:
    """Path of the image table shipped with gpufarm."""
    return Path(str(resources.files("gpufarm") / "data" / "images.yaml"))


_ROW_KEYS = {"repository", "tag", "digest", "read_on", "source", "unconfirmed", "chart"}


def parse_table(data: Any) -> dict[str, PinnedImage]:
    """The rows of an image table document; raises ImageTableError naming the first bad field.

    Each row needs a repository and a tag. A row with a digest needs `read_on` (a date) and a
    `source`; a row without one needs `unconfirmed` (why there is none) and no `read_on`.
    """
    if not isinstance(data, dict) or not isinstance(data.get("images"), dict):
        raise ImageTableError("the image table must be a mapping with an 'images' mapping")
    rows: dict[str, PinnedImage] = {}
    for name, row in data["images"].items():
        where = f"images.{name}"
        if not isinstance(row, dict):
            raise ImageTableError(f"{where} must be a mapping, got {row!r}")
        if unknown := sorted(set(row) - _ROW_KEYS):
            raise ImageTableError(f"{where} has unknown keys {unknown!r} (allowed: {sorted(_ROW_KEYS)!r})")
        for key in ("repository", "tag"):
            if not isinstance(row.get(key), str) or not row[key]:
                raise ImageTableError(f"{where}.{key} must be a non-empty string, got {row.get(key)!r}")
        digest = row.get("digest")
        if digest is None:
            if not row.get("unconfirmed"):
                raise ImageTableError(f"{where}.unconfirmed must say why the row has no digest")
            if row.get("read_on") is not None:
                raise ImageTableError(f"{where}.read_on must be empty when the row has no digest")
        else:
            if not isinstance(digest, str) or not DIGEST.match(digest):
                raise ImageTableError(f"{where}.digest must be {DIGEST_HINT}, got {digest!r}")
            if not isinstance(row.get("read_on"), datetime.date):
                raise ImageTableError(
                    f"{where}.read_on must be the date the digest was read (YYYY-MM-DD), "
                    f"got {row.get('read_on')!r}"
                )
            if not row.get("source"):
                raise ImageTableError(f"{where}.source must say where the digest was read")
            if row.get("unconfirmed"):
                raise ImageTableError(f"{where}.unconfirmed must be empty when the row has a digest")
        chart = row.get("chart")
        if chart is not None and (not isinstance(chart, str) or chart.count("@") != 1):
            raise ImageTableError(f"{where}.chart must be '<chart>@<version>', got {chart!r}")
        rows[name] = PinnedImage(
            name=name,
            repository=row["repository"],
            tag=row["tag"],
            digest=digest,
            read_on=row.get("read_on"),
            source=row.get("source"),
            unconfirmed=row.get("unconfirmed"),
            chart=chart,
        )
    return rows


@cache
def table() -> Mapping[str, PinnedImage]:
    """The shipped image table, read once per process."""
    return parse_table(yaml.safe_load(table_path().read_text(encoding="utf-8")))


def image(name: str) -> PinnedImage:
    """The table row `name`; raises KeyError naming the rows when there is none."""
    rows = table()
    if name not in rows:
        raise KeyError(f"no image {name!r} in {table_path().name} (rows: {', '.join(rows)})")
    return rows[name]


def reference(name: str, digests: Mapping[str, str] | None = None) -> str:
    """The pinned reference of image `name`: `repository:tag@sha256:...`.

    The digest is the table's, or `digests[name]` (a tier's `images.digests`) when the table has
    none; with neither, the reference carries the tag alone (and the tier is refused at deploy).
    """
    row = image(name)
    return row.reference(row.digest or (digests or {}).get(name))


def helm_tag(name: str, digests: Mapping[str, str] | None = None) -> str:
    """The `tag` value that pins image `name` in a chart that builds `repository:tag` (see
    :func:`reference` for where the digest comes from)."""
    row = image(name)
    return row.helm_tag(row.digest or (digests or {}).get(name))


def unconfirmed() -> list[PinnedImage]:
    """The rows without a digest, in table order."""
    return [row for row in table().values() if row.digest is None]


def split_reference(value: str) -> tuple[str, str, str]:
    """(repository, tag, digest) of an image reference; '' for a part it does not carry."""
    name, _, digest = value.partition("@")
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        repository, _, tag = name.rpartition(":")
    else:
        repository, tag = name, ""
    return repository, tag, digest
