"""Apps for the config-file tests, named as ``tests.cli.config_apps:<attr>``."""

from datetime import UTC, datetime, timedelta

from examples import payments
from pausepoint import Pausepoint
from pausepoint.testing import ScriptedModel

#: the payments example, whose pauses expire after a second (nobody answering denies them)
expiring_ai, _ = payments.build(ttl=timedelta(seconds=1))

#: an app whose clock reads the calendar's first day, an hour in: a retention reaches before it
first_day_ai = Pausepoint(clock=lambda: datetime.min.replace(tzinfo=UTC) + timedelta(hours=1))
first_day_ai.define_agent(name="greeter", model=ScriptedModel(lambda request: "hello"))
