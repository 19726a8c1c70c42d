"""Apps for the config-file tests, named as ``tests.cli.config_apps:<attr>``."""

from datetime import timedelta

from examples import payments

#: the payments example, whose pauses expire after a second (nobody answering denies them)
expiring_ai, _ = payments.build(ttl=timedelta(seconds=1))
