"""Validation errors raised by the core. The web layer maps them to HTTP 422, the CLI to a message."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Problem:
    """One thing wrong with an input: where (a dotted field path) and why."""

    field: str
    message: str

    def as_dict(self) -> dict[str, str]:
        return {"field": self.field, "message": self.message}


@dataclass
class SpecError(ValueError):
    """Raised with every problem found at once, never just the first."""

    problems: list[Problem] = field(default_factory=list)

    def __post_init__(self) -> None:
        super().__init__(self.__str__())

    def __str__(self) -> str:
        return "; ".join(f"{p.field}: {p.message}" for p in self.problems)


class ProblemCollector:
    """Accumulates problems so a validator can report all of them together."""

    def __init__(self) -> None:
        self.problems: list[Problem] = []

    def add(self, field_path: str, message: str) -> None:
        self.problems.append(Problem(field_path, message))

    def check(self, condition: bool, field_path: str, message: str) -> None:
        if not condition:
            self.add(field_path, message)

    def raise_if_any(self) -> None:
        if self.problems:
            raise SpecError(list(self.problems))
