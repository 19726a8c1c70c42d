"""Model providers, one module each, each behind an optional extra.

    from pausepoint.models.google_genai import GoogleAI      # pip install 'pausepoint[google]'
    from pausepoint.models.openai import OpenAI              # pip install 'pausepoint[openai]'
    from pausepoint.models.anthropic import Anthropic        # pip install 'pausepoint[anthropic]'
    from pausepoint.models.local import Local                # pip install 'pausepoint[local]'

Every adapter has the same anatomy, so they can be read side by side:

- a plugin (``OpenAI``, ``Anthropic``, ``GoogleAI``, ``Local``) with ``prefix``,
  ``resolve_model(name)`` and ``aclose()`` (and ``retry``, but for the local model: it has no
  transient failures); a model made by it as ``XModel(plugin, model_id)``,
  with ``plugin``, ``model_id``, ``name`` (``<prefix>/<model_id>``), ``generate`` and
  ``prepare()``, which checks before a first call what calls need (a cloud model its
  credentials: ``ModelAuthError``; the local model loads, and says what it loaded);
- ``_map_messages(messages)``, ``_map_tool_definition``, ``_process_response``,
  ``_process_streamed_response``, ``_map_usage``, ``_map_finish_reason``, and one ``_map_errors``
  context manager that translates the SDK's exceptions, HTTP statuses the same way for every
  provider (``_http``: 401/403 auth, 429 rate limited with Retry-After, 408/504 timeout,
  409/5xx unavailable, other 4xx bad request; ``details`` name ``provider`` and ``status``);
- the SDK client made lazily, one per event loop, closed by the plugin's ``aclose()``
  (``_clients``; ``Pausepoint.aclose()`` closes every plugin of an app). A client you pass in
  is used as it is and left open;
- retries by the plugin's ``RetryPolicy`` (``_retry``), the SDK's own turned off; a stream only
  until its first chunk was reported.
"""

from ._retry import RetryPolicy, call_with_retries, stream_with_retries

__all__ = ["RetryPolicy", "call_with_retries", "stream_with_retries"]
