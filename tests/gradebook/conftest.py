"""The generated class (classroom.py) as a fixture."""

from __future__ import annotations

import signal

import pytest

from tests.gradebook.classroom import Class, make_class


@pytest.fixture
def klass(tmp_path) -> Class:
    return make_class(tmp_path)


@pytest.fixture(autouse=True)
def _sigterm_kept():
    """SIGTERM as each test found it: gpulab.cli.main, called in this
    process by some tests, makes it raise (a batch system's stop), and a
    pytest worker stopped later must still stop."""
    saved = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, saved)
