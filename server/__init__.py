"""The faces of the product: the MCP server and the command line, thin adapters over ``skill``."""
