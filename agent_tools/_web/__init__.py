"""Web engine: search engines with failover, the guarded fetcher, extraction and the SQL cache."""
