"""The generated class (classroom.py) as a fixture."""

from __future__ import annotations

import pytest

from tests.gradebook.classroom import Class, make_class


@pytest.fixture
def klass(tmp_path) -> Class:
    return make_class(tmp_path)
