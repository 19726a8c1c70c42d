"""Every error pausepoint raises, with a stable machine-readable ``code``.

The tree::

    PausepointError
    ├── UsageError                  the caller asked for something that cannot be done
    │   ├── ResumeRefused           a resume that was refused; nothing ran, nothing was recorded
    │   │   ├── UnknownInterrupt        no such ref in this session
    │   │   ├── InterruptNameMismatch   the ref exists but belongs to another tool
    │   │   ├── AlreadyResolved         the pause was answered (or cancelled, or expired) already
    │   │   │   ├── LinkUsed                an approval link whose pause was answered already
    │   │   │   └── LinkSuperseded          an approval link whose call paused again since
    │   │   ├── PauseChanged            a bare ref, for a call that paused again showing something else
    │   │   ├── StaleInterrupt          the ref belongs to an older turn
    │   │   ├── NotPaused               the call completed without pausing
    │   │   ├── InterruptExpired        the pause outlived its time-to-live
    │   │   │   └── LinkExpired             an approval link past its expiry, or its pause's
    │   │   ├── NothingToResume         an empty resume while calls are paused, or nothing paused
    │   │   ├── DuplicateAnswer         one resume answers the same ref twice
    │   │   ├── InvalidAnswer           an answer fails its schema, or is not JSON data a session can keep
    │   │   ├── InputEditNotAllowed     replace_input on a tool that did not opt in
    │   │   ├── ToolDefinitionChanged   the paused tool's definition changed since the pause
    │   │   ├── IdempotencyKeyReused    the key was used before for a different request
    │   │   ├── ApprovalForbidden       the principal may not give this decision (role, separation of duties)
    │   │   ├── AlreadyApproved         this principal's approval of the pause is already counted
    │   │   ├── DecisionNotAllowed      the pause does not take this kind of answer
    │   │   └── InvalidGrant            a grant that cannot be given (a tool not grantable, bad bounds)
    │   ├── PendingInterrupts       send() while calls are paused
    │   ├── InvalidMessage          a user message a session cannot keep (not text/media, not JSON data)
    │   ├── SessionNotFound
    │   ├── GrantNotFound           no such grant in the session
    │   ├── InvalidSessionId        a caller-chosen session id that cannot name a session
    │   ├── DefinitionError         a tool, model or agent definition is invalid
    │   ├── ModelNotFound
    │   └── (the HTTP edge)
    │       ├── InvalidRequest      malformed JSON, wrong types, unknown fields (400)
    │       │   ├── UnsupportedTransferCoding  a Transfer-Encoding other than chunked (501)
    │       │   ├── UnsupportedContentCoding   a body sent with a Content-Encoding (415)
    │       │   └── InvalidLink         an approval link this server did not sign, or for another pause
    │       ├── Unauthenticated     no credentials, or credentials nobody issued (401)
    │       │   └── SlackSignatureError  a Slack callback without a valid signature
    │       ├── Forbidden           the caller may see the session but not act on it (403)
    │       │   ├── SlackTeamRefused    a Slack workspace the app does not take
    │       │   ├── SlackUserUnknown    a Slack user mapped to no principal
    │       │   └── SlackNotAllowed     a Slack user whose principal may not answer the session
    │       ├── NotFound            no such agent or route (404; sessions: SessionNotFound)
    │       ├── RequestTooLarge     a body or a message over the configured limit (413)
    │       ├── HistoryTooLong      the session's history reached the configured limit (422)
    │       ├── StaleSnapshot       a Genkit snapshot id that is not the session's latest (409)
    │       └── ClientStateRefused  a Genkit ``init.state``: the server is the source of truth (400)
    ├── ConcurrentUpdate            another writer changed the session during this call
    ├── ResumeInProgress            a retried idempotency key whose first call has not finished
    ├── TurnInProgress              a detached turn, or another process's tool calls, run in the session
    ├── TurnLost                    a detached turn's process stopped before the turn ended
    ├── StoreError                  a session store failed
    │   ├── VersionConflict         a conditional append lost the race (handled by the runtime)
    │   ├── PayloadTooLarge         a record exceeds the store's size limit
    │   └── SchemaVersionError      the database holds a schema this version cannot use
    ├── ServerError                 a server failed without saying why (500; details never sent)
    ├── ShuttingDown                the server stopped before it could answer (503); the call may have ended
    ├── IdentityProviderUnavailable  the OpenID Connect provider cannot be reached to sign in (503)
    ├── ServerUnreachable           ``pausepoint.client`` could not reach the server, or lost it mid-reply
    │   └── ServerTimeout               the server did not answer in time
    ├── WebhookSignatureError       a webhook request whose signature does not verify (receivers)
    ├── McpError                    an MCP server failed (pausepoint.mcp)
    │   ├── McpUnavailable          it could not be reached, or its connection closed
    │   └── McpTimeout              it did not answer in time
    └── ModelError                  the model failed
        ├── ModelAuthError          the provider refused the credentials
        ├── ModelRateLimited        too many requests (``retry_after`` seconds, when the provider said)
        ├── ModelUnavailable        a server error (``retry_after`` too) or a failed connection
        ├── ModelTimeout            no answer in time
        ├── ModelBadRequest         the provider rejected the request
        └── ModelOutputError        the model's output could not be used

``Interrupt`` (raised by tools to pause) is a signal, not an error, and lives in
``pausepoint``'s tool module; it is never wrapped in any of these.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AlreadyApproved",
    "AlreadyResolved",
    "ApprovalForbidden",
    "ClientStateRefused",
    "ConcurrentUpdate",
    "DecisionNotAllowed",
    "DefinitionError",
    "DuplicateAnswer",
    "Forbidden",
    "GrantNotFound",
    "HistoryTooLong",
    "IdempotencyKeyReused",
    "IdentityProviderUnavailable",
    "InputEditNotAllowed",
    "InterruptExpired",
    "InterruptNameMismatch",
    "InvalidAnswer",
    "InvalidGrant",
    "InvalidLink",
    "InvalidMessage",
    "InvalidRequest",
    "InvalidSessionId",
    "LinkExpired",
    "LinkSuperseded",
    "LinkUsed",
    "McpError",
    "McpTimeout",
    "McpUnavailable",
    "ModelAuthError",
    "ModelBadRequest",
    "ModelError",
    "ModelNotFound",
    "ModelOutputError",
    "ModelRateLimited",
    "ModelTimeout",
    "ModelUnavailable",
    "NotFound",
    "NotPaused",
    "NothingToResume",
    "PauseChanged",
    "PausepointError",
    "PayloadTooLarge",
    "PendingInterrupts",
    "RequestTooLarge",
    "ResumeInProgress",
    "ResumeRefused",
    "SchemaVersionError",
    "ServerError",
    "ServerTimeout",
    "ServerUnreachable",
    "SessionNotFound",
    "ShuttingDown",
    "SlackNotAllowed",
    "SlackSignatureError",
    "SlackTeamRefused",
    "SlackUserUnknown",
    "StaleInterrupt",
    "StaleSnapshot",
    "StoreError",
    "ToolDefinitionChanged",
    "TurnInProgress",
    "TurnLost",
    "Unauthenticated",
    "UnknownInterrupt",
    "UnsupportedContentCoding",
    "UnsupportedTransferCoding",
    "UsageError",
    "VersionConflict",
    "WebhookSignatureError",
]


class PausepointError(Exception):
    """Base of every pausepoint error. ``code`` is stable and used by the HTTP layer."""

    code = "pausepoint_error"

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details


class UsageError(PausepointError):
    code = "usage_error"


class ResumeRefused(UsageError):
    """A resume was refused before anything ran or was recorded; the session is unchanged."""

    code = "resume_refused"


class UnknownInterrupt(ResumeRefused):
    code = "unknown_interrupt"


class InterruptNameMismatch(ResumeRefused):
    code = "interrupt_name_mismatch"


class AlreadyResolved(ResumeRefused):
    """An answer to a pause that was answered already (``details["pause_id"]``, decided as
    ``details["decision"]``). When its call paused again since, ``details["live_pause_id"]``
    names the pause to answer now."""

    code = "already_resolved"


class PauseChanged(ResumeRefused):
    """An answer naming a call by its ref alone, while the call's live pause shows another input
    or metadata than an earlier pause of it did: the answer may be meant for what the earlier
    pause showed. ``details["pause_id"]`` names the live pause; answer it by that id."""

    code = "pause_changed"


class StaleInterrupt(ResumeRefused):
    code = "stale_interrupt"


class NotPaused(ResumeRefused):
    code = "not_paused"


class InterruptExpired(ResumeRefused):
    code = "interrupt_expired"


class NothingToResume(ResumeRefused):
    code = "nothing_to_resume"


class DuplicateAnswer(ResumeRefused):
    code = "duplicate_answer"


class InvalidAnswer(ResumeRefused):
    code = "invalid_answer"


class InputEditNotAllowed(ResumeRefused):
    code = "input_edit_not_allowed"


class ToolDefinitionChanged(ResumeRefused):
    code = "tool_definition_changed"


class IdempotencyKeyReused(ResumeRefused):
    code = "idempotency_key_reused"


class ApprovalForbidden(ResumeRefused):
    """The approval policy does not let this principal give this decision on this pause: the
    principal holds none of the roles that decide it, asked for the call themselves (separation
    of duties), or is unnamed where the policy must know who decides. ``details["reason"]``
    says which: ``role``, ``decision``, ``separation_of_duties`` or ``anonymous``."""

    code = "approval_forbidden"


class AlreadyApproved(ResumeRefused):
    """The pause needs several distinct approvers, and this principal's approval is counted already."""

    code = "already_approved"


class DecisionNotAllowed(ResumeRefused):
    """The pause does not take this kind of answer (a call paused for approval is approved or
    denied, not answered with a made-up result; a quorum's input is not edited)."""

    code = "decision_not_allowed"


class InvalidGrant(ResumeRefused):
    """A grant that cannot be given: a tool the policy does not let anyone grant, one that needs
    several approvals, bounds that do not fit the tool's input, a lifetime beyond the policy's."""

    code = "invalid_grant"


class PendingInterrupts(UsageError):
    code = "pending_interrupts"


class InvalidMessage(UsageError):
    """A user message (or its sender) a session cannot keep; nothing was recorded. Like
    ``InvalidAnswer`` for JSON data, ``details`` names the ``path``, ``rule`` and ``limit``."""

    code = "invalid_message"


class SessionNotFound(UsageError):
    code = "session_not_found"


class GrantNotFound(UsageError):
    code = "grant_not_found"


class InvalidSessionId(UsageError):
    code = "invalid_session_id"


class DefinitionError(UsageError):
    code = "definition_error"


class ModelNotFound(UsageError):
    code = "model_not_found"


class ConcurrentUpdate(PausepointError):
    code = "concurrent_update"


class ResumeInProgress(PausepointError):
    code = "resume_in_progress"


class TurnInProgress(PausepointError):
    code = "turn_in_progress"


class TurnLost(PausepointError):
    code = "turn_lost"


class StoreError(PausepointError):
    code = "store_error"


class VersionConflict(StoreError):
    code = "version_conflict"


class PayloadTooLarge(StoreError):
    code = "payload_too_large"


class SchemaVersionError(StoreError):
    code = "schema_version"


class ModelError(PausepointError):
    """The model call failed before the call recorded anything: the session is left as it was.
    (A model failing after the call recorded something — a batch's tool results, a resume's
    answers — ends the turn ``failed`` instead: its response says so, as a tool's failure does.)

    Also what an exception of the model's own that is no pausepoint error becomes (its type in
    the message, the exception itself as ``__cause__``)."""

    code = "model_error"

    #: whether the same request may succeed if sent again
    retryable = False

    def __init__(self, message: str, *, retry_after: float | None = None, **details: Any) -> None:
        super().__init__(message, **details, **({} if retry_after is None else {"retry_after": retry_after}))
        #: the seconds the provider asked to wait before the request is sent again (a rate
        #: limit's or an unavailable server's Retry-After), when it said
        self.retry_after = retry_after


class ModelAuthError(ModelError):
    code = "model_auth"


class ModelRateLimited(ModelError):
    code = "model_rate_limited"
    retryable = True


class ModelUnavailable(ModelError):
    code = "model_unavailable"
    retryable = True


class ModelTimeout(ModelError):
    code = "model_timeout"
    retryable = True


class ModelBadRequest(ModelError):
    code = "model_bad_request"


class ModelOutputError(ModelError):
    code = "model_output"


class McpError(PausepointError):
    """An MCP server failed: it answered a request with an error, or broke the protocol.

    Raised while listing a server's tools; during a call, a tool's ``McpError`` is handed to
    the model as that call's result like any tool error (``tool_errors="model"``)."""

    code = "mcp_error"


class McpUnavailable(McpError):
    """The MCP server could not be started or reached, or its connection closed (it died)."""

    code = "mcp_unavailable"


class McpTimeout(McpError):
    """The MCP server did not answer in time (``connect_timeout`` / ``call_timeout``)."""

    code = "mcp_timeout"


# -- the HTTP edge: raised by pausepoint.server, raised again by pausepoint.client ---------


class InvalidRequest(UsageError):
    code = "invalid_request"


class UnsupportedTransferCoding(InvalidRequest):
    """A request body sent with a transfer coding the server does not decode (RFC 9112 6.1)."""

    code = "unsupported_transfer_coding"


class UnsupportedContentCoding(InvalidRequest):
    """A request body sent with a content coding (``Content-Encoding: gzip``, ...): the server
    reads only uncoded bodies (RFC 9110 15.5.16)."""

    code = "unsupported_content_coding"


class Unauthenticated(UsageError):
    code = "unauthenticated"


class Forbidden(UsageError):
    code = "forbidden"


class NotFound(UsageError):
    code = "not_found"


class RequestTooLarge(UsageError):
    code = "request_too_large"


class HistoryTooLong(UsageError):
    code = "history_too_long"


class StaleSnapshot(UsageError):
    code = "stale_snapshot"


class ClientStateRefused(UsageError):
    code = "client_state_refused"


class ServerError(PausepointError):
    code = "internal"


class ShuttingDown(PausepointError):
    """The server was stopping and cut the request short before it could answer (past its
    grace period). What the request started may have ended or not: read the session, or send
    the message or resume again with the same idempotency key (it gets the outcome, or runs it)."""

    code = "shutting_down"


class IdentityProviderUnavailable(PausepointError):
    """The server cannot reach its OpenID Connect provider (or the provider's discovery
    document lacks what signing in needs) to start the console's sign-in: try again later."""

    code = "identity_provider_unavailable"


class ServerUnreachable(PausepointError):
    """``pausepoint.client`` could not reach the server (connection refused, a host name that
    does not resolve, a connection that broke), after its retries. ``details``: ``method``,
    ``url``, and for a send, a resume or an approve the ``idempotency_key`` it was sent with.
    The client retries only what is safe to send again, so a send that failed this way may or
    may not have been taken: send it again with that key (the server gives back what the first
    one started, never a second turn), or read the session first."""

    code = "server_unreachable"


class ServerTimeout(ServerUnreachable):
    """The server did not answer ``pausepoint.client`` within its ``timeout``, after its retries."""

    code = "server_timeout"


class WebhookSignatureError(PausepointError):
    """Raised by ``pausepoint.webhooks.verify_signature``: the request was not signed by a known
    secret, or its timestamp is too old (a replay)."""

    code = "webhook_signature"


# -- the approval links and Slack's callbacks (pausepoint.server) ---------------------------------


class InvalidLink(InvalidRequest):
    """A link that is not one this server signed (forged, altered, cut short, or signed with a
    secret it no longer holds), or that names another pause than the one answered."""

    code = "invalid_link"


class LinkExpired(InterruptExpired):
    """A link past its expiry, or whose pause expired."""

    code = "link_expired"


class LinkUsed(AlreadyResolved):
    """A link whose pause was answered already."""

    code = "link_used"


class LinkSuperseded(AlreadyResolved):
    """A link whose call paused again since: the new pause is decided on its own card."""

    code = "link_superseded"


class SlackSignatureError(Unauthenticated):
    """A callback without a valid Slack signature: forged, altered, or older than five minutes."""

    code = "slack_signature"


class SlackTeamRefused(Forbidden):
    """A callback from a Slack workspace the app does not take (``SlackApp.teams``)."""

    code = "slack_team_refused"


class SlackUserUnknown(Forbidden):
    """A Slack user ``SlackApp.users`` does not map to a principal."""

    code = "slack_user_unknown"


class SlackNotAllowed(Forbidden):
    """A Slack user whose principal may not answer the session."""

    code = "slack_not_allowed"
