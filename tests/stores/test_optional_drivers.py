"""``pausepoint.stores`` imports without asyncpg or redis; using their stores names the extra."""

from __future__ import annotations

import subprocess
import sys

import pytest

from .processes import ROOT

# Runs in a fresh interpreter where importing the driver fails, as if it were not installed.
PROBE = """
import sys
class Missing:
    def find_spec(self, name, path=None, target=None):
        if name == {driver!r} or name.startswith({driver!r} + "."):
            raise ImportError("No module named " + repr(name))
sys.meta_path.insert(0, Missing())

import pausepoint.stores
from pausepoint.stores import InMemorySessionStore, SqliteSessionStore
try:
    from pausepoint.stores import {name}
except ImportError as exc:
    print(exc)
else:
    print("imported")
"""


@pytest.mark.parametrize(
    ("driver", "name", "extra"),
    [("asyncpg", "PostgresSessionStore", "postgres"), ("redis", "RedisSessionStore", "redis")],
)
def test_a_missing_driver_names_the_extra(driver, name, extra):
    result = subprocess.run(
        [sys.executable, "-c", PROBE.format(driver=driver, name=name)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.strip() == f"{driver} is not installed: pip install 'pausepoint[{extra}]'"


def test_the_stores_are_exported():
    import pausepoint.stores as stores

    assert {"PostgresSessionStore", "RedisSessionStore"} <= set(stores.__all__)
    assert stores.PostgresSessionStore.__module__ == "pausepoint.stores.postgres"
    assert stores.RedisSessionStore.__module__ == "pausepoint.stores.redis"
    with pytest.raises(AttributeError):
        stores.NoSuchStore  # noqa: B018
