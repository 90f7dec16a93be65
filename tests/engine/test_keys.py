"""The keys every cache uses, and the one bounded cache."""

from __future__ import annotations

import numpy as np

from pallas_verify.case import Outcome
from pallas_verify.keys import Lru, bound_key, config_key, example_key, shapes_key


def test_lru_evicts_least_recently_used():
    cache = Lru(maxsize=2)
    cache.put("a", Outcome())
    cache.put("b", Outcome())
    assert cache.get("a") is not None
    cache.put("c", Outcome())
    assert cache.get("b") is None
    assert (cache.hits, cache.misses) == (1, 1)


def test_get_or_make_makes_once():
    cache, made = Lru(maxsize=4), []
    assert cache.get_or_make("k", lambda: made.append(1) or "v") == "v"
    assert cache.get_or_make("k", lambda: made.append(1) or "w") == "v"
    assert made == [1] and (cache.hits, cache.misses) == (1, 1)


def test_config_key_is_order_free_and_takes_unhashable_values():
    assert config_key({"a": 1, "b": (2,)}) == config_key({"b": (2,), "a": 1})
    assert config_key({"a": [1, 2]}) != config_key({"a": [1, 3]})


def test_bound_key_keys_unhashable_callables_by_identity():
    class Unhashable:
        __hash__ = None

        def __call__(self):
            return 0

    fn = Unhashable()
    assert bound_key(fn, {"a": 1}) == bound_key(fn, {"a": 1}) != bound_key(Unhashable(), {"a": 1})
    assert bound_key(len, {}, "vmap") == (len, config_key({}), "vmap")


def test_example_key_depends_on_values_and_shapes_key_does_not():
    x, y = np.zeros(4, np.float32), np.ones(4, np.float32)
    assert example_key({}, (x,)) != example_key({}, (y,))
    assert shapes_key((x,)) == shapes_key((y,)) == (((4,), "float32"),)
