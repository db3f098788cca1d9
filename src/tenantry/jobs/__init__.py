"""Jobs: submission with journal and dedup, one shared status cache, waiters."""
