"""Talking to the daemon: the sync client (CLI, hooks, shims), the async client (MCP
shim) and the detection of which agent the current process belongs to."""
