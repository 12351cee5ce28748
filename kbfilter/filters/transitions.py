"""The kernel Bayes filter's transition without controls: weights over the training states moved
by the learned conditional embedding (kernel sum rule, algorithms §3, §6).

It has the interface of the controlled transitions (:mod:`kbfilter.filters.controlled`),
``apply(w, u)``, so the filter's prediction is one call whichever it was fitted with.
"""

import numpy as np

from ..persistence import persistent
from .base import SharedModel, no_control, transition_events

__all__ = ["LearnedTransition"]


@persistent("embedding", "operator", holds={"embedding": "ConditionalEmbedding", "operator": "Operator"})
class LearnedTransition(SharedModel):
    """``w_pred = A w``: the transition learned from the logged pairs ``(x_t, x_{t+1})``.

    Read-only once built and shared by copies of a filter.

    Parameters
    ----------
    embedding : ConditionalEmbedding
        The fitted conditional embedding of ``x_{t+1}`` given ``x_t``.
    operator : Operator
        ``A`` over the training states the filter keeps: the predecessors' weights moved to their
        successors.
    """

    #: no control input
    dim_u = None

    def __init__(self, embedding, operator):
        self.embedding = embedding
        self.operator = operator

    def _after_load(self):
        # a saved file is untrusted, and a transition may be loaded on its own: it maps weights over
        # the training states to weights over the same states
        if self.operator.shape[0] != self.operator.shape[1]:
            raise ValueError(f"operator: expected a square operator (training states to training states), got "
                             f"shape {self.operator.shape}")

    @property
    def fit_diagnostics(self):
        """Fallbacks taken while fitting the embedding, named ``transition_<kind>``."""
        return transition_events(self.embedding.diagnostics_)

    #: no Nystrom factorisation of its own
    short_kernels = ()

    def apply(self, w, u=None):
        """The predicted weights ``A w``.

        Parameters
        ----------
        w : ndarray of shape (T,)
            The current weights.
        u : None
            A control is refused: the transition was learned without controls.

        Returns
        -------
        ndarray of shape (T,)
            The predicted weights, not normalised.
        """
        no_control(u)
        return np.asarray(self.operator @ w).ravel()

    def adjoint(self, v, u=None):
        """``A^T v``: a function on the next step's states carried back to this step's (the
        conditional expectation the smoother's backward pass takes).

        Parameters
        ----------
        v : ndarray of shape (T,)
            Values at the training states, one step ahead.
        u : None
            A control is refused, as in :meth:`apply`.

        Returns
        -------
        ndarray of shape (T,)
            ``sum_j A[j, i] v[j]`` for each training state ``i``.
        """
        no_control(u)
        return np.asarray(self.operator.adjoint(v)).ravel()
