"""Facility mode: one Tenantry service for all users of a cluster."""
