"""bench.compare drives its arms one at a time; across levels each pair of arms runs in
both orders, so an A/B between two arms does not read their positions as a difference."""
from itertools import combinations

from bench.compare import arm_order


def test_every_arm_runs_once_per_turn():
    assert all(sorted(arm_order("abcdef", turn)) == list("abcdef") for turn in range(12))


def test_in_three_levels_every_pair_of_arms_runs_in_both_orders():
    orders = [arm_order("abcdef", turn) for turn in range(3)]  # one repetition of levels 1, 8, 64
    for x, y in combinations("abcdef", 2):
        assert {o.index(x) < o.index(y) for o in orders} == {True, False}, (x, y, orders)
