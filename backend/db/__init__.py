"""Database plumbing: engines, column types and the dialect-specific JSON expressions."""
