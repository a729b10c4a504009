"""The faces of the product: the MCP server and the command line, thin adapters over ``skill``.

Owns: ``mcp_server`` (the server and its tool registry), ``mcp_tools`` (one adapter a tool), ``mcp_resources``
(documents, run status and metrics, inspection reports, the ``finetune`` prompt), ``tool_schemas`` (the schemas
as tools/list publishes them), ``tool_calls`` (how one call runs: errors, progress, cancellation),
``tool_errors`` (the error shape and the renderer for bad arguments), ``stdio_transport`` and
``http_transport``, ``heavy_imports`` (the training libraries imported once under a lock), ``cli`` (the
command line) and ``commands`` (one handler per subcommand).
"""
