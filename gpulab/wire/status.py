"""The one list of what a check can end as, and why an event stream stops.

A `Status` is a `str`, so results keep their JSON form ("passed") and a
value read back from a state file compares equal to the member."""

from __future__ import annotations

from enum import Enum


class Status(str, Enum):
    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"  # gpulab could not run the check (its fault or the machine's)
    TIMEOUT = "timeout"
    CRASHED = "crashed"  # the learner's process died (a fault, a signal, out of memory)
    CANCELLED = "cancelled"

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)

    @classmethod
    def of(cls, value: object) -> Status | None:
        """The member `value` names, or None (a result from elsewhere)."""
        try:
            return cls(value)
        except ValueError:
            return None


# What progress records of a check: the rest leave no attempt behind.
RECORDED = (Status.PASSED, Status.FAILED)
