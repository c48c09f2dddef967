"""The digest an Idempotency-Key is stored with: a repeat must ask for the same thing."""
import hashlib
import json


def digest(asked: dict) -> str:
    """sha256 of what a request asks for, as parsed: the same for the same request
    whatever its key order or spacing."""
    canonical = json.dumps(asked, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()
