"""vLLM's own request fields on /v1: which are honoured, which refused by name, and their docs."""
