"""What both doors (REST and MCP) promise: field limits and output shapes, defined once.

A leaf package: it imports nothing from knowmind above ``store``, so ``api/`` and ``mcp/`` can
both use it.
"""
