"""porter over the Model Context Protocol: ``porter mcp`` (see :mod:`porter.mcp.server`)."""
