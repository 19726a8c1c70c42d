"""Checkpoints: a session's folded state kept beside its log, so a process that never saw the
session loads it without folding the whole log — a cache, checked on every read and never the
source of truth.

The rooms, from the entry points down:

- ``_cache``: ``load`` and ``save``, against a store — the two the runtime calls; which checks a
  checkpoint must pass, and when an extension is written rather than a new base;
- ``_format``: the format (derived from ``SessionState``'s fields), its fingerprint, and the
  header line that frames a base or an extension (``frame``, ``read_header``);
- ``_encode``: a base or an extension, encoded from a state;
- ``_decode``: a base decoded into a state, and extensions applied to it;
- ``_lazy_list``, ``_lazy_dict``: the list and dict a loaded state keeps its history in, whose
  items stay JSON in the checkpoint's bytes until read; ``_key_index``: a dict's keys, by bucket;
  ``_slices``: items laid end to end, found by their bounds;
- ``_chunks``: the checksums of a base a chunk at a time; ``_books``: this process's
  bookkeeping of a state's checkpoint, kept beside the state.

May import: ``session``, ``content``, ``stores``, ``errors``.
"""
