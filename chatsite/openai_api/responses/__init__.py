"""The Responses API: /v1/responses and a response's own endpoints."""
