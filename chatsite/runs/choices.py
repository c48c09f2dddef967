"""A completion's n choices: how many a call may ask for, and each one's seed.

Each choice is a run of its own (stream, lease, failover, finalize), created with
its siblings in one admission; this module holds only the rules they share."""
import hashlib

MAX_CHOICES = 8  # n of a /v1 completion: 1..MAX_CHOICES
_SEED_SPACE = 2**31  # as the seeds admission draws when the client sends none


def choice_seeds(seed: int, count: int) -> list[int]:
    """The seed of each of `count` choices: the first keeps `seed` (so n=1 and the
    first of n agree), the others are derived from it, so the choices differ from
    each other and the same seed gives the same choices again."""
    return [seed] + [int.from_bytes(hashlib.sha256(f"choice:{seed}:{i}".encode()).digest()[:8], "big") % _SEED_SPACE
                     for i in range(1, count)]
