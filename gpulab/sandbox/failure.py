"""What the sandbox raises when the learner's code failed: the loop in
gpulab.sandbox.main turns it into a "raised" reply for the judge."""

from __future__ import annotations


class LearnerFailure(Exception):
    def __init__(self, summary: str, message: str = "") -> None:
        super().__init__(summary)
        self.summary, self.message = summary, message
