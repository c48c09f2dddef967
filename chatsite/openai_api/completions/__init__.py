"""The chat and text completions: /v1/chat/completions and /v1/completions."""
