"""MCP (Model Context Protocol) for pausepoint: ``pip install 'pausepoint[mcp]'``.

- ``McpConnection.stdio(...)`` / ``McpConnection.http(...)``: an MCP server to use; hand it to
  ``Pausepoint.mcp_tools(...)`` to give its tools to agents — behind approvals, with the
  server's questions (elicitation) as durable pauses.
- ``mcp_server(ai, ...)``: an app's agents served *as* an MCP server (``pausepoint serve --mcp``
  mounts it at ``/mcp``; ``pausepoint serve --mcp-stdio`` speaks it over stdin/stdout), so an
  MCP client — a desktop assistant — can talk to them and answer their pauses.

See docs/mcp.md.
"""

from __future__ import annotations

try:
    import mcp as _sdk  # noqa: F401
except ImportError as exc:  # pragma: no cover - the extra is installed in development
    from .._extras import missing_extra

    raise missing_extra("mcp", "mcp") from exc

from ._approval import ApprovalSpec
from ._connection import McpConnection
from ._tools import McpTool

__all__ = ["ApprovalSpec", "McpConnection", "McpTool"]
