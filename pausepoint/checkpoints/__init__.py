"""Checkpoints: a session's folded state kept beside its log, so a process that never saw the
session loads it without folding the whole log — a cache, checked on every read and never the
source of truth.

May import: ``session``, ``content``, ``stores``, ``errors``.
"""
