"""The contract suite's driver: a backend (memory or postgres) with clients A, B, C and W.

Every case is written once and runs on both backends; expected rows, waits and final tables are
literal values, so both backends must agree with them and hence with each other.
"""

from __future__ import annotations

import pytest

from .script import Script


@pytest.fixture
def db(backend) -> Script:
    return Script(backend)
