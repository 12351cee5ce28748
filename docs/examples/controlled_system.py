"""Your own controlled system: a unicycle driven by speed and turn-rate commands, seen by position fixes.

Its transition depends on the control, so the model takes it (``transition_mean(X, u)``) and
declares ``dim_u``; :func:`kbfilter.systems.controlled_run` simulates it under a policy, and every
filter takes the controls as ``batch_filter(zs, us)``. The extended Kalman filter linearises the
transition under each step's control (from finite differences here: no Jacobian is written); the
smoothers take the controls too. (A learned filter takes controls as well: see "Known controls".)
"""

import numpy as np

import kbfilter as kb


class Unicycle(kb.systems.System):
    """State (east, north, heading); control (speed, turn rate) a step; fixes of the position."""

    dim_x, dim_z, dim_u, obs_shape = 3, 2, 2, (2,)
    process_cov = np.diag([0.05, 0.05, 0.02]) ** 2
    observation_cov = 0.5**2 * np.eye(2)

    def transition_mean(self, X, u=None):
        speed, turn = np.broadcast_to(u, (len(X), 2)).T
        heading = X[:, 2]
        return np.column_stack([X[:, 0] + speed * np.cos(heading), X[:, 1] + speed * np.sin(heading), heading + turn])

    def observe_mean(self, X):
        return X[:, :2]

    def initial_state(self, rng):
        return np.zeros(3)


def policy(x, rng):
    """Cruise at 1 m a step, turning at random."""
    return np.array([1.0, rng.normal(0.0, 0.1)])


system = Unicycle()
states, controls, fixes = kb.systems.controlled_run(system, 200, policy, rng=0)
start, start_cov = states[0], np.diag([0.25, 0.25, 0.01])


def rmse(means, truth):
    return np.sqrt(np.mean(np.sum((means[:, :2] - truth[:, :2]) ** 2, axis=1)))


print(f"position fixes alone:       RMSE {rmse(fixes, states):.3f} m")
for name, filt in [("extended Kalman", kb.filters.ExtendedKalman(system)),
                   ("unscented Kalman", kb.filters.UnscentedKalman(system)),
                   ("particle filter", kb.filters.ParticleFilter(system, n_particles=2000, rng=0))]:
    means = filt.initialize(start, start_cov).batch_filter(fixes[1:], us=controls[1:])[0]
    print(f"{name + ':':27s} RMSE {rmse(means, states[1:]):.3f} m")
for name, cls in [("extended", kb.filters.ExtendedKalman), ("unscented", kb.filters.UnscentedKalman)]:
    smoothed = cls(system).initialize(start, start_cov).smooth(fixes[1:], us=controls[1:])[0]
    print(f"{name + ' Kalman, smoothed:':27s} RMSE {rmse(smoothed, states[1:]):.3f} m")
