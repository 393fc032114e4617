"""`--fail-on` gates for CI: which findings of a review stop the pipeline.

Gates (docs/decisions/0056-review-verdicts-and-gates.md):

- ``replacement``: a stateful or traffic-bearing resource is replaced or deleted, a change makes
  the deploy fail (a custom-named resource to replace, a cluster moved to another VPC, a name
  still held by an orphaned stack), or a stack leaves the app and stays deployed;
- ``exposure``: something becomes reachable from outside private networks;
- ``iam``: an IAM grant is added (permission, trust or managed policy);
- ``cost>N``: the monthly bill over all stacks rises by more than N USD at the floor (orphaned
  stacks keep their bill).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from gpufarm.review.report import Review

ALLOWED = "replacement, exposure, iam, cost>N (N in USD a month, a number such as 500 or 99.5)"
_COST = re.compile(r"^cost\s*>\s*(\d+(?:\.\d+)?)$")


class GateError(ValueError):
    """A `--fail-on` value that names no gate."""


@dataclass(frozen=True, kw_only=True)
class Gate:
    """One `--fail-on` gate."""

    kind: str
    """'replacement', 'exposure', 'iam' or 'cost'."""
    limit_usd: float | None = None
    """The cost gate's threshold, USD a month."""

    @property
    def label(self) -> str:
        """The gate as the user writes it."""
        return f"cost>{self.limit_usd:g}" if self.kind == "cost" else self.kind


def parse_gates(values: Iterable[str]) -> list[Gate]:
    """Gates from `--fail-on` values, each one gate or a comma-separated list; duplicates dropped."""
    gates: dict[str, Gate] = {}
    for value in values:
        for part in value.split(","):
            text = part.strip()
            if text in {"replacement", "exposure", "iam"}:
                gate = Gate(kind=text)
            elif match := _COST.match(text):
                gate = Gate(kind="cost", limit_usd=float(match.group(1)))
            else:
                raise GateError(f"--fail-on: {text!r} is not a gate; allowed: {ALLOWED}")
            gates.setdefault(gate.label, gate)
    return list(gates.values())


def _ids(items: Iterable[str]) -> str:
    listed = sorted(set(items))
    return ", ".join(listed[:5]) + (f" and {len(listed) - 5} more" if len(listed) > 5 else "")


def _replacement(review: Review) -> str:
    parts = []
    replaced = [f"{s.name}/{r.logical_id}" for s in review.stacks for r in s.critical_replacements]
    failing = [f"{s.name}/{f.logical_id}" for s in review.stacks for f in s.failures]
    orphans = [s.name for s in review.stacks if s.status == "orphaned"]
    if failing:
        parts.append(f"{len(failing)} change(s) make the deploy fail ({_ids(failing)})")
    if replaced:
        parts.append(f"{len(replaced)} stateful or traffic-bearing resource(s) replaced ({_ids(replaced)})")
    if orphans:
        parts.append(f"{len(orphans)} stack(s) leave the app and stay deployed ({_ids(orphans)})")
    return "; ".join(parts)


def _exposure(review: Review) -> str:
    opened = [f"{s.name}/{e.logical_id}" for s in review.stacks for e in s.exposure_opened]
    return f"{len(opened)} exposure(s) opened ({_ids(opened)})" if opened else ""


def _iam(review: Review) -> str:
    added = [g for s in review.stacks for g in s.iam_added]
    if not added:
        return ""
    wildcards = sum(1 for g in added if g.wildcard)
    return (
        f"{len(added)} IAM grant(s) added"
        + (f", {wildcards} wildcard(s)" if wildcards else "")
        + (f" ({_ids(g.principal for g in added)})")
    )


def tripped(review: Review, gates: Iterable[Gate]) -> list[str]:
    """One line per gate the review trips: `GATE: what tripped it`."""
    out = []
    for gate in gates:
        if gate.kind == "replacement":
            found = _replacement(review)
        elif gate.kind == "exposure":
            found = _exposure(review)
        elif gate.kind == "iam":
            found = _iam(review)
        else:
            delta = review.cost_delta()
            limit = gate.limit_usd or 0.0
            found = (
                f"the monthly bill rises by ${delta:,.2f} at the floor, above ${limit:,.2f}"
                if delta is not None and delta > limit
                else ""
            )
        if found:
            out.append(f"{gate.label}: {found}")
    return out
