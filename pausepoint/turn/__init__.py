"""A turn: the model loop that runs a model's calls and records what happens, exactly once —
the records it appends (``_journal``), the chunks it streams (``_streaming``), the events it
announces (``_events``), the spans it traces (``_telemetry``), and what it knows of the calls
it leaves running when it stops short (``_cut_short``).

May import: ``approval``, ``tools``, ``session``, ``models``, ``content``, ``stores``, ``errors``.
"""
