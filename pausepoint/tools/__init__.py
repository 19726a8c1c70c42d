"""Tools: a Python function as a tool a model can call (``Tool``, ``ToolRunContext``), the
``Interrupt`` it raises to pause, how its pause reads to people (``PauseDisplay``), and how a
model's calls run (``_dispatch``).

May import: ``session`` (the answers a pause takes), ``models`` (tool definitions), ``content``,
``errors``. The public names are re-exported from ``pausepoint``.
"""
