"""Composed MoE layers (`mslk.moe.layers`): BaselineMoE and MetaShufflingMoE over mslk's routing,
token-movement and grouped-GEMM ops, with expert / model parallelism over torch.distributed."""

from .args import MoEArgs  # noqa: F401
from .baseline import BaselineMoE  # noqa: F401
from .params import Experts, RoutedExperts, ScaledParameter, SharedExperts, init_params  # noqa: F401
from .shuffling_moe import MetaShufflingMoE  # noqa: F401

__all__ = ["MoEArgs", "BaselineMoE", "MetaShufflingMoE", "ScaledParameter", "Experts", "RoutedExperts",
           "SharedExperts", "init_params"]
