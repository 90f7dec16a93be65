"""tiled_configs: one-line configs whose blocks, grid and semantics fit together."""

import math

from hypothesis import find, given, settings
from hypothesis import strategies as st

import strategies as pvs

FIND = settings(database=None, max_examples=500)
AXES = {"m": "sublane", "n": "lane", "k": "lane"}


@given(
    st.data(),
    st.sampled_from(["mosaic_tpu", "triton", "mosaic_gpu"]),
    st.sampled_from([None, 1, 4, 16]),
)
def test_configs_cover_their_problem_within_the_budget(data, backend, budget):
    configs = pvs.tiled_configs(
        axes=AXES,
        reduction_axes=("k",),
        backend=backend,
        dtypes=("float32", "bfloat16", "int8"),
        max_grid_points=budget,
    )
    config = data.draw(configs)
    names = list(AXES)
    assert config["grid"] == tuple(math.ceil(config[a] / config[f"block_{a}"]) for a in names)
    assert math.prod(config["grid"]) <= (budget or 4**3)
    assert config["dimension_semantics"][2] == "arbitrary"
    if backend == "mosaic_tpu":
        tile = pvs.preferred_sublane_tile(config["dtype"])
        assert config["block_m"] % tile == 0
        assert config["block_n"] % 128 == config["block_k"] % 128 == 0
    if backend == "triton":
        assert all(config[f"block_{a}"] & (config[f"block_{a}"] - 1) == 0 for a in names)


def test_configs_shrink_to_one_full_block():
    minimal = find(pvs.tiled_configs(axes=AXES, reduction_axes=("k",)), bool, settings=FIND)
    assert minimal == {
        "m": 8,
        "n": 128,
        "k": 128,
        "block_m": 8,
        "block_n": 128,
        "block_k": 128,
        "grid": (1, 1, 1),
        "dimension_semantics": ("arbitrary", "arbitrary", "arbitrary"),
        "dtype": "float32",
    }
    ragged = find(pvs.tiled_configs(), lambda c: c["rows"] % c["block_rows"], settings=FIND)
    assert (ragged["rows"], ragged["block_rows"], ragged["grid"]) == (7, 8, (1, 1))
    whole = find(pvs.tiled_configs(ragged=False), lambda c: c["grid"] != (1, 1), settings=FIND)
    assert whole["rows"] % whole["block_rows"] == whole["cols"] % whole["block_cols"] == 0
