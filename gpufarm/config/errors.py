"""Errors raised when a tier configuration is invalid."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class ConfigIssue:
    """One problem in a tier config: where it is and what is wrong."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class ConfigError(Exception):
    """A tier config that cannot be built; carries every issue found, in document order."""

    def __init__(self, issues: list[ConfigIssue], *, source: str = "tier config") -> None:
        self.issues = issues
        self.source = source
        super().__init__(self.render())

    def render(self) -> str:
        """The message shown to the user: the source, then one line per issue."""
        lines = [f"invalid {self.source}:"]
        lines += [f"  - {issue}" for issue in self.issues]
        return "\n".join(lines)
