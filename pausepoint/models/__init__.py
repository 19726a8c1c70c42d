"""Model providers, one module each, each behind an optional extra.

    from pausepoint.models.google_genai import GoogleAI      # pip install 'pausepoint[google]'
    from pausepoint.models.openai import OpenAI              # pip install 'pausepoint[openai]'
    from pausepoint.models.anthropic import Anthropic        # pip install 'pausepoint[anthropic]'
    from pausepoint.models.local import Local                # pip install 'pausepoint[local]'

Every adapter has the same anatomy (``_map_messages``, ``_map_tool_definition``,
``_process_response``, ``_process_streamed_response``, ``_map_usage``, ``_map_finish_reason``
and one ``_map_errors`` context manager) so they can be read side by side.
"""

from ._retry import RetryPolicy, call_with_retries, stream_with_retries

__all__ = ["RetryPolicy", "call_with_retries", "stream_with_retries"]
