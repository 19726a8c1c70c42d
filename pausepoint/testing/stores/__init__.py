"""The session store contract as a test suite: run it on your own store.

Every store pausepoint ships passes this suite, and a store of your own (any object with the
methods of ``pausepoint.stores.SessionStore``) can run it too. In a test module of your
project, import the suite and give it one fixture, ``open_store``: an async function that
opens a store on one place (a file, a schema, a key prefix) — every call a new store object on
the same data, as another process would open it, and taking the keyword options the built-in
stores take (``max_record_bytes``)::

    import pytest
    from pausepoint.testing.stores import *  # noqa: F403 - the suite's tests and its ``store`` fixture

    @pytest.fixture
    def open_store(tmp_path):
        async def open_(**options):
            return MyStore(tmp_path / "sessions", **options)
        return open_

pytest then collects every ``test_*`` of the suite in that module. The suite needs ``pytest``
and ``pytest-asyncio`` with ``asyncio_mode = "auto"``. Each test starts from an empty place.
Session ids and owners are kept exactly as given — no case folding, no Unicode normalisation,
no trimming: ids are chosen by users, and two of them must never share a session.
A store that keeps checkpoints (``pausepoint.stores.CheckpointStore``) is held to that part of
the contract too: a checkpoint kept only for a version its log holds and never replaced by an
older one, an extension kept only at the checkpoint's head, a new base that drops the
extensions, an extension that replaces the last ones (if its ``extend_checkpoint`` takes
``replaces``) doing so whole or not at all, a read that sees one consistent checkpoint (a base
and the extensions of one moment), and the checkpoint deleted with its session. A store that
keeps none skips those tests.
"""

from __future__ import annotations

try:
    import pytest
except ImportError as exc:  # pragma: no cover - exercised only without pytest
    raise ImportError("pausepoint.testing.stores is a pytest suite: pip install pytest pytest-asyncio") from exc

# A failing check shows its values, as the store author's own asserts do: pytest rewrites the
# suite's modules, imported below, as it rewrites test modules.
pytest.register_assert_rewrite(*(f"{__name__}.{module}" for module in (
    "_appends", "_checkpoints", "_events", "_extensions", "_fixtures", "_listing",
)))  # fmt: skip

from ._appends import (  # noqa: E402 - after the rewrite is registered
    test_an_append_not_yet_durable_is_seen_at_once_and_continued,
    test_append_then_read,
    test_append_to_a_missing_session_conflicts,
    test_appends_continue_the_log,
    test_configured_size_limit,
    test_conflicting_append_writes_nothing,
    test_ids_are_kept_exactly,
    test_is_a_session_store,
    test_long_history_in_many_appends,
    test_long_history_in_one_append,
    test_malformed_append_is_refused,
    test_oversize_payload_is_refused_and_nothing_written,
    test_payload_at_the_limit_is_accepted,
    test_racing_appends_one_wins,
    test_racing_creators_one_wins,
    test_read_after_a_version_keeps_kinds_and_bytes,
    test_ties_are_ordered_by_id_bytewise,
    test_unicode,
    test_unknown_session,
)
from ._checkpoints import (  # noqa: E402 - after the rewrite is registered
    checkpoint_stores,
    checkpoints,
    test_a_base_read_before_a_newer_one_replaced_it_stays_whole,
    test_a_checkpoint_is_kept_as_written,
    test_a_checkpoint_is_never_replaced_by_an_older_one,
    test_a_checkpoint_may_be_larger_than_a_record,
    test_a_checkpoint_needs_a_log_that_holds_its_version,
    test_a_deleted_session_takes_its_checkpoint_along,
    test_checkpoints_do_not_change_listings_or_appends,
    test_racing_checkpoint_writers_leave_the_latest,
)
from ._events import (  # noqa: E402 - after the rewrite is registered
    event,
    keeps_events,
    test_a_refused_append_announces_nothing,
    test_a_waiter_is_woken_by_another_writer,
    test_an_append_without_events_adds_none,
    test_claims_are_oldest_first_and_limited,
    test_events_are_written_with_the_append_and_read_in_order,
    test_list_deliveries_filters_newest_first,
    test_one_delivery_per_target_claimed_with_a_lease,
    test_prune_keeps_what_is_still_to_be_delivered,
    test_racing_claimers_share_nothing,
    test_retry_then_fail_then_requeue,
    test_the_secret_is_made_once_and_shared,
    test_unicode_and_binary_data,
    visible,
)
from ._extensions import (  # noqa: E402 - after the rewrite is registered
    chained,
    grow_checkpoint,
    test_a_deleted_session_takes_its_extensions_along,
    test_a_new_base_drops_the_extensions,
    test_a_read_racing_extensions_sees_one_whole_checkpoint,
    test_an_extension_is_kept_only_at_the_head,
    test_an_extension_is_refused_without_a_checkpoint_or_past_the_log,
    test_an_extension_may_replace_the_last_ones,
    test_an_extension_that_cannot_replace_changes_nothing,
    test_extensions_keep_their_bytes_and_order,
    test_racing_extensions_from_the_same_head_keep_one,
    test_racing_merges_from_the_same_head_keep_one,
)
from ._fixtures import DEFAULT_MAX_RECORD_BYTES, T0, OpenStore, at, entries, ids, put, store, summary  # noqa: E402
from ._listing import (  # noqa: E402 - after the rewrite is registered
    listed,
    tenants,
    test_delete,
    test_list_by_tenant,
    test_list_filters_and_order,
    test_list_limit_and_offset,
    test_list_returns_whole_summaries,
    test_listing_follows_the_latest_summary,
    test_tenant_listing_follows_the_latest_summary,
)

__all__ = [
    "DEFAULT_MAX_RECORD_BYTES",
    "OpenStore",
    "T0",
    "at",
    "chained",
    "checkpoint_stores",
    "checkpoints",
    "entries",
    "event",
    "grow_checkpoint",
    "ids",
    "keeps_events",
    "listed",
    "put",
    "store",
    "summary",
    "tenants",
    "test_a_base_read_before_a_newer_one_replaced_it_stays_whole",
    "test_a_checkpoint_is_kept_as_written",
    "test_a_checkpoint_is_never_replaced_by_an_older_one",
    "test_a_checkpoint_may_be_larger_than_a_record",
    "test_a_checkpoint_needs_a_log_that_holds_its_version",
    "test_a_deleted_session_takes_its_checkpoint_along",
    "test_a_deleted_session_takes_its_extensions_along",
    "test_a_new_base_drops_the_extensions",
    "test_a_read_racing_extensions_sees_one_whole_checkpoint",
    "test_a_refused_append_announces_nothing",
    "test_a_waiter_is_woken_by_another_writer",
    "test_an_append_not_yet_durable_is_seen_at_once_and_continued",
    "test_an_append_without_events_adds_none",
    "test_an_extension_is_kept_only_at_the_head",
    "test_an_extension_is_refused_without_a_checkpoint_or_past_the_log",
    "test_an_extension_may_replace_the_last_ones",
    "test_an_extension_that_cannot_replace_changes_nothing",
    "test_append_then_read",
    "test_append_to_a_missing_session_conflicts",
    "test_appends_continue_the_log",
    "test_checkpoints_do_not_change_listings_or_appends",
    "test_claims_are_oldest_first_and_limited",
    "test_configured_size_limit",
    "test_conflicting_append_writes_nothing",
    "test_delete",
    "test_events_are_written_with_the_append_and_read_in_order",
    "test_extensions_keep_their_bytes_and_order",
    "test_ids_are_kept_exactly",
    "test_is_a_session_store",
    "test_list_by_tenant",
    "test_list_deliveries_filters_newest_first",
    "test_list_filters_and_order",
    "test_list_limit_and_offset",
    "test_list_returns_whole_summaries",
    "test_listing_follows_the_latest_summary",
    "test_long_history_in_many_appends",
    "test_long_history_in_one_append",
    "test_malformed_append_is_refused",
    "test_one_delivery_per_target_claimed_with_a_lease",
    "test_oversize_payload_is_refused_and_nothing_written",
    "test_payload_at_the_limit_is_accepted",
    "test_prune_keeps_what_is_still_to_be_delivered",
    "test_racing_appends_one_wins",
    "test_racing_checkpoint_writers_leave_the_latest",
    "test_racing_claimers_share_nothing",
    "test_racing_creators_one_wins",
    "test_racing_extensions_from_the_same_head_keep_one",
    "test_racing_merges_from_the_same_head_keep_one",
    "test_read_after_a_version_keeps_kinds_and_bytes",
    "test_retry_then_fail_then_requeue",
    "test_the_secret_is_made_once_and_shared",
    "test_tenant_listing_follows_the_latest_summary",
    "test_ties_are_ordered_by_id_bytewise",
    "test_unicode",
    "test_unicode_and_binary_data",
    "test_unknown_session",
    "visible",
]
