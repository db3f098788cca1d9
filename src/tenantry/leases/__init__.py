"""Leases: warm pilot allocations that run agents' short commands without new jobs."""
