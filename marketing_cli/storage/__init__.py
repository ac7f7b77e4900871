"""Storage: both engines behind one connection (the SQLite file, PostgreSQL), the dialect
differences in one module, field SQL, the JSON encoder, and `mkt db copy` (copy/)."""
