"""The daemon: lifespan wiring, HTTP over the Unix socket, MCP shim."""
