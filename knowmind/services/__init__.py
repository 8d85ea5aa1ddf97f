"""Services: the operations REST, MCP and the CLI share."""
