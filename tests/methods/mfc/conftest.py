"""The `space` fixture: one small metric space per kind."""

from __future__ import annotations

import pytest

from mfc_cases import KINDS, make_space
from paperdag.methods.mfc import MetricSpace


@pytest.fixture(params=KINDS)
def space(request: pytest.FixtureRequest) -> MetricSpace:
    return make_space(request.param)
