"""The runtime: the app (``Pausepoint``), its agents and their chats — asynchronous, synchronous
and detached — and what a process keeps for the sessions it serves (cached states, locks,
checkpoint writes, the calls it stopped short: ``_stopped``).

May import: everything below the edges (``turn``, ``checkpoints``, ``approval``, ``mcp``,
``tools``, ``session``, ``models``, ``content``, ``stores``, ``errors``) and ``webhooks``. The
public names are re-exported from ``pausepoint``.
"""
