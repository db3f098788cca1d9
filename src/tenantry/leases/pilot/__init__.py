"""The pilot: the worker that runs inside a lease allocation, and its wire protocol."""
