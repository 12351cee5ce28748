"""Probability rules on kernel means (algorithms §3-§5)."""

from .bayes_rule import KernelBayesRule, kulsif_weights
from .chain_rule import JointKernelMean, kernel_chain_rule
from .conditional import ConditionalEmbedding
from .conditional_selection import loo_loss, select_conditional_embedding
from .sum_rule import kernel_sum_rule

__all__ = [
    "ConditionalEmbedding",
    "loo_loss",
    "select_conditional_embedding",
    "kernel_sum_rule",
    "kernel_chain_rule",
    "JointKernelMean",
    "kulsif_weights",
    "KernelBayesRule",
]
