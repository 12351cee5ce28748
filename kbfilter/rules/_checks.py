"""Argument checks shared by the rules."""

from sklearn.utils.validation import check_is_fitted

from ..embedding import KernelMean, probability_weights
from .conditional import ConditionalEmbedding


def check_conditional(conditional):
    if not isinstance(conditional, ConditionalEmbedding):
        raise ValueError(f"conditional: expected a ConditionalEmbedding, got {type(conditional).__name__}")
    check_is_fitted(conditional, "kernel_in_")


def check_prior(prior, dim, name="prior"):
    if not isinstance(prior, KernelMean):
        raise ValueError(f"{name}: expected a KernelMean, got {type(prior).__name__}")
    if prior.points.shape[1] != dim:
        raise ValueError(f"{name}: expected points of dimension {dim}, got {prior.points.shape[1]}")
    return prior


def prior_sample(prior, dim, name="prior"):
    """A prior's points and its weights as a probability's (:func:`~kbfilter.embedding.probability_weights`)."""
    prior = check_prior(prior, dim, name)
    return prior.points, probability_weights(prior.weights, f"{name}.weights")
