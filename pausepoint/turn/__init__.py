"""A turn: the model loop that runs a model's calls and records what happens, exactly once —
the records it appends (``_journal``), the chunks it streams (``_streaming``), the events it
announces (``_events``) and the spans it traces (``_telemetry``).

May import: ``approval``, ``tools``, ``session``, ``models``, ``content``, ``stores``, ``errors``.
"""
