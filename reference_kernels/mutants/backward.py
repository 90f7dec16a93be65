"""Mutants of backward kernels: the forward is correct, only the VJP is wrong, so only
the ``grad`` transform can catch them."""

from __future__ import annotations

import dataclasses

from reference_kernels._draw import without
from reference_kernels.mutants import Mutant
from reference_kernels.transforms_attention import (
    FLASH_ATTENTION_CAUSAL_VJP,
    FLASH_ATTENTION_VJP,
    flash_attention_vjp,
)
from reference_kernels.transforms_matmul import MATMUL_VJP, matmul_vjp, matmul_vjp_configs

__all__ = ["MATMUL_VJP_SQUARE", "MUTANTS"]

_ATTENTION_SIZES = ("heads", "seq", "d")


def _attention_dq_scale(q, k, v, **config):
    return flash_attention_vjp(q, k, v, bug="dq_scale", **config)


def _attention_backward_unmasked(q, k, v, **config):
    return flash_attention_vjp(q, k, v, bug="backward_causal_mask", **config)


def _matmul_transposed_operand(x, y, **config):
    return matmul_vjp(x, y, bug="transposed_operand", **config)


# matmul with n == k, so a square tile of y taken untransposed still has the right shape.
MATMUL_VJP_SQUARE = dataclasses.replace(MATMUL_VJP, name="matmul_vjp_square",
                                        configs=matmul_vjp_configs(square=True), transforms=("grad",))

FLASH_ATTENTION_BWD_DQ_SCALE = dataclasses.replace(
    FLASH_ATTENTION_VJP, name="flash_attention_bwd_dq_scale",
    kernel=without(_attention_dq_scale, *_ATTENTION_SIZES))
FLASH_ATTENTION_BWD_NO_CAUSAL_MASK = dataclasses.replace(
    FLASH_ATTENTION_CAUSAL_VJP, name="flash_attention_bwd_no_causal_mask",
    kernel=without(_attention_backward_unmasked, *_ATTENTION_SIZES))
MATMUL_BWD_TRANSPOSED_OPERAND = dataclasses.replace(
    MATMUL_VJP_SQUARE, name="matmul_bwd_transposed_operand",
    kernel=without(_matmul_transposed_operand, "m", "n", "k"))

MUTANTS = [
    Mutant(
        spec=FLASH_ATTENTION_BWD_DQ_SCALE,
        twin=FLASH_ATTENTION_VJP,
        expects=("mismatch",),
        bug="the dq backward kernel forgets the softmax scale 1/sqrt(d): dq is sqrt(d) times too large",
    ),
    Mutant(
        spec=FLASH_ATTENTION_BWD_NO_CAUSAL_MASK,
        twin=FLASH_ATTENTION_CAUSAL_VJP,
        expects=("mismatch",),
        bug="the backward kernels drop the causal mask (the forward keeps it): future keys get gradient",
    ),
    Mutant(
        spec=MATMUL_BWD_TRANSPOSED_OPERAND,
        twin=MATMUL_VJP_SQUARE,
        expects=("mismatch",),
        bug="the dx backward kernel contracts g with y instead of y.T (a square tile hides the shape error)",
    ),
]
