"""OpenAI's Python SDK against a live stack's /v1, as the tests use it."""
import openai


def v1_client(url: str, api_key: str, *, timeout: float = 60) -> openai.OpenAI:
    """A client of `url`'s /v1 with `api_key`; no retries, so a test sees each answer as sent."""
    return openai.OpenAI(base_url=f"{url}/v1", api_key=api_key, max_retries=0, timeout=timeout)
