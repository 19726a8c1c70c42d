"""The provider every cross-provider test runs on, in turn (``tests/models/providers.py``)."""

from __future__ import annotations

import pytest

from .providers import ALL, Provider


@pytest.fixture(params=list(ALL))
def provider(request: pytest.FixtureRequest) -> Provider:
    return ALL[request.param]
