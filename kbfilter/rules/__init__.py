"""Probability rules on kernel means (ALGORITHMS §3-§5)."""

from .conditional import ConditionalEmbedding
from .conditional_selection import loo_loss, select_conditional_embedding

__all__ = ["ConditionalEmbedding", "loo_loss", "select_conditional_embedding"]
