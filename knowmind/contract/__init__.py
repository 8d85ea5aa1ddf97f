"""What both doors (REST and MCP) promise about their input: field limits, defined once.

A leaf package (it imports only msgspec and ``knowmind.errors``), so every layer may use it.
The output shapes both doors (REST and MCP) share live in ``knowmind.api.outputs``.
"""
