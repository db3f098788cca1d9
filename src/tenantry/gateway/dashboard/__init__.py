"""The facility dashboard: server-rendered pages over the telemetry store."""
