"""Short commands: routed to a lease or run locally, journaled, streamed back."""
