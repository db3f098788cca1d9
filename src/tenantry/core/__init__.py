"""The vocabulary every layer may import: errors, models, settings, events, units, tasks."""
