"""Your own data, end to end: a CSV log -> tune_filter -> batch_filter -> error and plot.

The system is one the library does not ship: a damped pendulum pushed by random torques (state:
angle in radians and angular velocity in rad/s), seen as a noisy range and bearing from a beacon
below it. The log is simulated first so that the example runs anywhere; replace it with yours.
Writing the model as a ``System`` is only needed for the classical baselines at the end.
"""

import os
import tempfile

import numpy as np

import kbfilter as kb


class Pendulum(kb.systems.System):
    """x = (angle, angular velocity); z = (range, bearing) of the bob from a beacon at (0, -2)."""

    dim_x, dim_z, obs_shape = 2, 2, (2,)

    def __init__(self, dt=0.05, damping=0.1, torque=0.6, noise=(0.05, 0.05)):
        self.dt, self.damping = dt, damping
        self.process_cov = np.diag([1e-6, torque**2 * dt])       # random torques act on the velocity
        self.observation_cov = np.diag(np.square(noise))

    def transition_mean(self, X):                                 # one semi-implicit Euler step
        angle, velocity = np.atleast_2d(X).T
        velocity = velocity + self.dt * (-9.81 * np.sin(angle) - self.damping * velocity)
        return np.column_stack([angle + self.dt * velocity, velocity])

    def observe_mean(self, X):                                    # the bob is at (sin a, -cos a)
        angle = np.atleast_2d(X)[:, 0]
        dx, dy = np.sin(angle), 2.0 - np.cos(angle)
        return np.column_stack([np.hypot(dx, dy), np.arctan2(dy, dx)])

    # Jacobians are not needed: the extended Kalman filter takes finite differences of the means

    def initial_state(self, rng):                                 # where a simulation (or a particle) starts
        return np.array([rng.uniform(-1, 1), 0.0])

    def initial_belief(self, z0):                                 # where the Kalman filters start
        return np.zeros(2), np.diag([0.5, 4.0])


if __name__ == "__main__":
    folder = tempfile.mkdtemp()
    # -- a recorded log, one row per step: angle, velocity, range, bearing --------------------------
    log = os.path.join(folder, "pendulum.csv")
    states, obs = Pendulum().simulate(800, rng=0)
    np.savetxt(log, np.hstack([states, obs]), delimiter=",", header="angle,velocity,range,bearing", comments="")

    # -- the recipe: load, tune on the last steps of the training part, filter the rest --------------
    data = np.loadtxt(log, delimiter=",", skiprows=1)
    train, test = data[:650], data[650:]
    kbf = kb.tune_filter(kb.KernelBayesFilter(), train[:, :2], train[:, 2:], validation_length=150, progress=False)
    print("chosen:", kbf.best_params_, "grid extended:", kbf.extended_params_ or "no")
    means = kbf.batch_filter(test[:, 2:])[0]
    errors = (means - test[:, :2]) ** 2
    print(f"kernel Bayes filter: MSE {errors.sum(axis=1).mean():.3f} (angle {errors[:, 0].mean():.3f}, "
          f"velocity {errors[:, 1].mean():.3f})")

    # -- a figure of the estimate against the truth --------------------------------------------------
    ax = kb.plots.plot_trajectory(test[:, :2], {"kbf": means}, steps=100)
    kb.plots.save_figure(ax, os.path.join(folder, "pendulum.png"))

    # -- the baselines, given the true model ---------------------------------------------------------
    for name, baseline in [("EKF", kb.filters.ExtendedKalman(Pendulum())),
                           ("UKF", kb.filters.UnscentedKalman(Pendulum())),
                           ("particle filter", kb.filters.ParticleFilter(Pendulum(), n_particles=1000, rng=0))]:
        estimate = baseline.batch_filter(test[:, 2:])[0]
        print(f"{name}: MSE {np.mean(np.sum((estimate - test[:, :2]) ** 2, axis=1)):.3f}")
