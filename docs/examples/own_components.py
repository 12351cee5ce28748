"""Your own system, feature map and filter, built from kbfilter's components.

* a system: a damped pendulum observed by range and bearing from a beacon (a ``System`` subclass:
  the EKF, UKF and particle filter can then use its model);
* a feature map: any scikit-learn transformer; ``fit(Z, X)`` sees the flattened training
  observations and the states;
* a filter: a kernel Bayes filter whose belief diffuses over the training states instead of
  following a learned transition (for logs of (state, observation) pairs that are not
  trajectories). It composes the learned observation model and follows the filter contract,
  so ``tune_filter`` tunes it with no other code.
"""

from collections import Counter

import numpy as np
from sklearn.preprocessing import FunctionTransformer
from sklearn.utils.validation import check_is_fitted

import kbfilter as kb
from kbfilter.embedding import normalise_weights, weighted_covariance
from kbfilter.filters.base import LearnedFilter, training_pairs
from kbfilter.filters.observation import ObservationSettings, ObservationSpace, observation_grid


# -- a system: x = (angle, angular velocity), z = (range, bearing) from a beacon at (2, 0) --------
class Pendulum(kb.systems.System):
    dim_x, dim_z, obs_shape = 2, 2, (2,)
    process_cov = np.diag([1e-4, 4e-3])
    observation_cov = np.diag([0.01, 0.01])

    def transition_mean(self, X):
        X = np.atleast_2d(X)
        angle, velocity = X[:, 0], X[:, 1]
        velocity = 0.995 * velocity - 0.1 * np.sin(angle)
        return np.column_stack([angle + 0.1 * velocity, velocity])

    def observe_mean(self, X):
        X = np.atleast_2d(X)
        bob = np.column_stack([np.sin(X[:, 0]), -np.cos(X[:, 0])])
        offset = bob - np.array([2.0, 0.0])
        return np.column_stack([np.hypot(offset[:, 0], offset[:, 1]), np.arctan2(offset[:, 1], offset[:, 0])])

    def initial_state(self, rng):
        return np.array([rng.uniform(-1.5, 1.5), 0.0])


# -- a filter composed from the learned observation model ---------------------------------------
class DiffusingKernelBayesFilter(LearnedFilter):
    """Kernel Bayes' rule on a belief over the training states that spreads by ``k_x`` each step."""

    def __init__(self, rule="iw", kernel_x=None, kernel_z=None, scale=1.0, scale_z=None, reg_prior=1e-2,
                 reg_update=1e-2, features="auto", approximation="exact", rank=None, outlier_quantile=None):
        self.rule, self.kernel_x, self.kernel_z = rule, kernel_x, kernel_z
        self.scale, self.scale_z, self.reg_prior, self.reg_update = scale, scale_z, reg_prior, reg_update
        self.features, self.approximation, self.rank = features, approximation, rank
        self.outlier_quantile = outlier_quantile

    def fit(self, states, observations, *, controls=None):
        settings = ObservationSettings.of(self)                # checks the shared parameters once
        X, Z, obs_shape = training_pairs(states, observations)   # checked, stacked, flattened
        space, Z = ObservationSpace.fitted(settings.features, obs_shape, Z, X)         # feature map
        kernels = settings.fitted_kernels(X, Z, space)         # each kernel fitted once, then shared
        self.observation_ = settings.fit_model(space, X, Z, settings.reg_prior, None, kernels)
        rule = self.observation_.rule
        self.states_ = X
        self.diffusion_ = rule.kernel_x_(X)                    # k_x(x_i, x_j): the belief's spread
        self.projection_ = rule.projection_operator()
        return self.reset()

    def _fit_diagnostics(self):
        return self.observation_.fit_diagnostics

    def _grid_for(self, obs_shape):                            # what default_grid() answers
        return observation_grid(self.features, self.approximation, obs_shape)

    def reset(self):
        check_is_fitted(self, "observation_")
        self._events = Counter()
        self.weights = np.full(len(self.states_), 1.0 / len(self.states_))
        self._set_estimate("prior", self.weights @ self.states_, weighted_covariance(self.states_, self.weights))
        self._set_estimate("post", self.x_prior, self.P_prior)
        return self

    def predict(self, u=None):
        self.weights = normalise_weights(self.diffusion_ @ self.weights)[0]
        self._set_estimate("prior", self.weights @ self.states_, weighted_covariance(self.states_, self.weights))

    def update(self, z):
        row = None if z is None else self.observation_.admit(z)
        if row is None:
            self._keep_prediction()
            return
        raw, info = self.observation_.posterior_weights(self.projection_ @ self.weights, row)
        self._record_all(info)
        p = normalise_weights(raw)[0]
        self.weights = self.weights if p is None else p
        self._set_estimate("post", self.weights @ self.states_, weighted_covariance(self.states_, self.weights))


system = Pendulum()
states, obs = system.simulate(600, rng=0)
test_states, test_obs = system.simulate(150, rng=1)
scaled = FunctionTransformer(lambda Z: Z / np.array([1.0, 0.5]))   # a feature map: any transformer


def mse(means):
    return np.mean(np.sum((means - test_states) ** 2, axis=1))


small_grid = {"scale": (0.25, 0.5, 1.0, 2.0, 4.0), "reg_prior": (1e-3,), "reg_update": (1e-3, 1e-2, 1e-1)}
diffusing = kb.tune_filter(DiffusingKernelBayesFilter(features=scaled), states, obs, param_grid=small_grid,
                           progress=False)
learned = kb.tune_filter(kb.KernelBayesFilter(features=scaled), states, obs, param_grid=small_grid, progress=False)
ukf = kb.filters.UnscentedKalman(system)
ukf.x, ukf.P = test_states[0], np.eye(2) * 0.1
print(f"test MSE: diffusing belief {mse(diffusing.batch_filter(test_obs)[0]):.4f}, "
      f"learned transition {mse(learned.batch_filter(test_obs)[0]):.4f}, "
      f"UKF with the true model {mse(ukf.batch_filter(test_obs)[0]):.4f}")
