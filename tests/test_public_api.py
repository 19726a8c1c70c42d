"""The curated public surface, pinned: a change here is a change users see."""

import pausepoint
import pausepoint.errors
import pausepoint.models
import pausepoint.stores
import pausepoint.testing


def test_top_level_names():
    assert sorted(pausepoint.__all__) == sorted(
        [
            "Agent", "AgentFinishReason", "AgentResponse", "ApprovalPolicy", "ApprovalStatus", "ApprovalView",
            "AuditEntry", "Chat", "DetachedTurn", "Escalation", "FunctionModel", "Grant", "GrantInfo",
            "Interrupt", "InterruptChunk", "JsonLimits", "MediaPart", "Message", "Model", "ModelChunk", "ModelRequest",
            "ModelResponse", "Part", "PauseDisplay", "PauseField", "PauseView", "Pausepoint", "PendingInterrupt",
            "Plugin", "Role", "Rule", "TextChunk", "TextDelta", "TextPart", "Tool", "ToolCallDelta",
            "ToolCallDeltaChunk", "ToolDefinition", "ToolProgressChunk", "ToolRequestChunk", "ToolRequestPart",
            "ToolResponse", "ToolResponsePart", "ToolRestart", "ToolResultChunk", "ToolRunContext", "TurnChunk",
            "TurnEndChunk", "TurnStatus", "TurnStream", "Usage", "deny_on_expiry",
            "SyncChat", "SyncTurnStream", "run_sync",
        ]
    )  # fmt: skip
    for name in pausepoint.__all__:
        assert getattr(pausepoint, name) is not None


def test_subpackages_export_what_they_list():
    for module in (pausepoint.errors, pausepoint.stores, pausepoint.testing):
        for name in module.__all__:
            assert hasattr(module, name), f"{module.__name__}.{name}"
    assert sorted(pausepoint.stores.__all__) == [
        "Checkpoint", "CheckpointStore",
        "Delivery", "DeliveryState", "Event", "InMemorySessionStore", "LogEntry", "LogSlice", "PARTIAL_BASE_KEPT",
        "PostgresSessionStore", "REPLACED_BASES_KEPT", "RedisSessionStore",
        "SessionStore", "SessionSummary", "SqliteSessionStore", "StoreSecret", "check_entries", "version_conflict",
    ]  # fmt: skip
    assert sorted(pausepoint.models.__all__) == ["RetryPolicy", "call_with_retries", "stream_with_retries"]
    assert {"ScriptedModel", "tool_call", "reply"} <= set(pausepoint.testing.__all__)


def test_the_store_suite_is_public():
    import pausepoint.testing.stores as suite

    for name in suite.__all__:
        assert hasattr(suite, name), f"pausepoint.testing.stores.{name}"
    tests = [name for name in suite.__all__ if name.startswith("test_")]
    assert len(tests) >= 25
    assert {"test_racing_appends_one_wins", "test_a_checkpoint_is_kept_as_written"} <= set(tests)
    assert {"store", "summary", "entries"} <= set(suite.__all__)


def test_operating_surface():
    import pausepoint.metrics
    import pausepoint.telemetry
    import pausepoint.webhooks

    assert sorted(pausepoint.telemetry.__all__) == ["CAPTURE_ENV", "Metrics", "Telemetry"]
    assert sorted(pausepoint.metrics.__all__) == ["PrometheusMetrics"]
    assert sorted(pausepoint.webhooks.__all__) == [
        "ApprovalLinks", "EVENT_KINDS", "EmailNotifier", "EventKind", "SlackApp", "SlackUsers", "Webhook", "sign",
        "slack_text", "verify_signature",
    ]  # fmt: skip
    for module in (pausepoint.telemetry, pausepoint.metrics, pausepoint.webhooks):
        for name in module.__all__:
            assert hasattr(module, name), f"{module.__name__}.{name}"
    assert isinstance(pausepoint.metrics.PrometheusMetrics(), pausepoint.telemetry.Metrics)


def test_every_error_has_a_distinct_code_and_interrupt_is_not_an_error():
    errors = [getattr(pausepoint.errors, n) for n in pausepoint.errors.__all__]
    codes = [e.code for e in errors]
    assert len(codes) == len(set(codes))
    assert all(issubclass(e, pausepoint.errors.PausepointError) for e in errors)
    assert not issubclass(pausepoint.Interrupt, pausepoint.errors.PausepointError)
    assert issubclass(pausepoint.errors.AlreadyResolved, pausepoint.errors.ResumeRefused)
    assert issubclass(pausepoint.errors.ResumeRefused, pausepoint.errors.UsageError)
    assert not issubclass(pausepoint.errors.ModelError, pausepoint.errors.UsageError)


def test_every_chat_surface_approves_by_ref():
    """``approve`` (and ``approve_stream``) is on the async chat, the sync chat and the client's
    chat, with the same parameters (the client's caller is its token: no principal, no via)."""
    import inspect

    from pausepoint.client import RemoteChat

    def parameters(cls: type, name: str) -> list[str]:
        return [p for p in inspect.signature(getattr(cls, name)).parameters if p != "self"]

    expected = ["ref", "replace_input", "grant", "pause_id", "metadata", "idempotency_key"]
    for name in ("approve", "approve_stream"):
        assert parameters(pausepoint.Chat, name) == [*expected, "principal", "via"]
        assert parameters(pausepoint.SyncChat, name) == [*expected, "principal", "via"]
        assert parameters(RemoteChat, name) == expected
