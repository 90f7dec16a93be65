"""Placement: which hardware a backend's units ask for, and what Ray is asked for."""

from __future__ import annotations

import pytest

from pallas_verify.backends import families as targets
from pallas_verify.errors import InvalidArgument
from pallas_verify.execution.placement import (
    HARDWARE_POLICIES,
    RAY_ACCELERATOR_TYPES,
    RayRequest,
    choose_hardware,
    hardware_for,
    ray_request,
)


def test_every_target_has_a_ray_accelerator_type():
    names = {c.name for c in targets.TPU_CHIPS} | {g.name for g in targets.GPU_TARGETS}
    assert names == set(RAY_ACCELERATOR_TYPES)


@pytest.mark.parametrize(("backend", "hardware"), [
    ("interpret", None), ("tpu_interpret", None), ("gpu_interpret", None),
    ("mosaic_tpu:v5e", "tpu:v5e"), ("triton:h100", "gpu:h100"), ("mosaic_gpu:b200", "gpu:b200"),
])
def test_hardware_of_a_backend(backend, hardware):
    assert hardware_for(backend) == hardware


def test_ray_requests_ask_for_the_chip_and_its_accelerator_type():
    assert ray_request(None) == RayRequest()
    tpu = ray_request("tpu:v6e")
    assert tpu.resources == {"TPU": 1.0, "accelerator_type:TPU-V6E": 0.001}
    assert tpu.num_gpus == 0
    gpu = ray_request("gpu:a100")
    assert (gpu.num_gpus, dict(gpu.resources)) == (1.0, {"accelerator_type:A100": 0.001})
    assert gpu.fits({"CPU": 4, "GPU": 1, "accelerator_type:A100": 1})
    assert not gpu.fits({"CPU": 4, "GPU": 1, "accelerator_type:H100": 1})
    assert not tpu.fits({"CPU": 4})


def test_hardware_policies():
    offered = {"tpu:v5e": None}

    def offers(hw):
        return offered.get(hw, f"nobody has {hw}")

    assert set(HARDWARE_POLICIES) == {"auto", "require", "never"}
    assert choose_hardware("interpret", "require", offers) == (None, None)
    assert choose_hardware("mosaic_tpu:v5e", "auto", offers) == ("tpu:v5e", None)
    assert choose_hardware("mosaic_tpu:v5e", "never", offers) == (None, None)
    assert choose_hardware("mosaic_tpu:v6e", "auto", offers) == (None, None)
    assert choose_hardware("mosaic_tpu:v6e", "require", offers) == (
        None, "--hardware require: mosaic_tpu:v6e needs a real tpu:v6e; nobody has tpu:v6e")
    with pytest.raises(InvalidArgument, match="hardware='always' is not a policy; choose from auto, require, never"):
        choose_hardware("interpret", "always", offers)
