"""What a session holds: messages and their parts, and the JSON normal form every value is
kept in (``JsonLimits``), with the checks that turn a caller's message or a model's output into
something a session can keep.

May import: ``pausepoint.errors`` and ``pausepoint.stores`` (the size of a record). The public
names are re-exported from ``pausepoint``.
"""
