"""ingest: bytes of rate logs (JSONL, gzip, per-rank files, summaries) in; one RunLog per run out."""
