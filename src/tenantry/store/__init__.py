"""State store: SQLite (WAL, one writer thread) with numbered SQL migrations."""
