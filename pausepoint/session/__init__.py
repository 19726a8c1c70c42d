"""The session log and its fold: the records a turn appends (``_records``), the state folded
from them (``_state``, a pure fold), and what callers see of it — pending interrupts and the
answers they take, the audit trail, responses (``_interrupts``, ``_views``, ``_response``).

May import: ``content``, ``stores`` (summaries), ``errors``. Nothing here does I/O. The public
names are re-exported from ``pausepoint``.
"""
