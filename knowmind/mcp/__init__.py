"""The MCP server's protocol-independent parts: JSON-RPC dispatch, tool catalogue, validation.

Nothing here depends on the ``mcp`` SDK package; the HTTP framing is ``knowmind.api.mcp``.
"""
