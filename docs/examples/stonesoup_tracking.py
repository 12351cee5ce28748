"""A Stone Soup tracking loop with a learned predictor and updater, against Stone Soup's own Kalman
filter with a constant-velocity model, scored with Stone Soup's OSPA metric.

The target moves on the noisy oscillation (a radius that pulses eight times a turn): a motion no
constant-velocity model knows, and one the kernel Bayes filter learns from a logged run. The
Kalman filter's process noise is chosen on the same logged run (the smallest position error over
a grid), never on the test run.
"""

import datetime

import numpy as np
from stonesoup.measures import Euclidean
from stonesoup.metricgenerator.ospametric import OSPAMetric
from stonesoup.models.measurement.linear import LinearGaussian
from stonesoup.models.transition.linear import CombinedLinearGaussianTransitionModel, ConstantVelocity
from stonesoup.predictor.kalman import KalmanPredictor
from stonesoup.types.detection import Detection
from stonesoup.types.hypothesis import SingleHypothesis
from stonesoup.types.state import GaussianState, State
from stonesoup.updater.kalman import KalmanUpdater

import kbfilter as kb
from kbfilter.stonesoup import KernelBayesPredictor, KernelBayesUpdater

system = kb.systems.Oscillation()
states, obs = system.simulate(1000, rng=0)            # the logged run
truth, zs = system.simulate(200, rng=1)               # the test run
start, second = datetime.datetime(2026, 1, 1), datetime.timedelta(seconds=1)
times = [start + t * second for t in range(len(zs))]
R = system.observation_cov


def track(predictor, updater, first, observations):
    """Stone Soup's single-target loop: predict to each detection's time, update with it."""
    state, out = first, [first]
    for z, when in zip(observations[1:], times[1:]):
        prediction = predictor.predict(state, timestamp=when)
        state = updater.update(SingleHypothesis(prediction, Detection(z[:, None], timestamp=when)))
        out.append(state)
    return out


def kalman(q, observations):
    motion = CombinedLinearGaussianTransitionModel([ConstantVelocity(q), ConstantVelocity(q)])
    sensor = LinearGaussian(ndim_state=4, mapping=(0, 2), noise_covar=R)
    first = GaussianState([[observations[0, 0]], [0.0], [observations[0, 1]], [0.0]], np.diag([R[0, 0], 1, R[1, 1], 1]),
                          timestamp=start)
    return KalmanPredictor(motion), KalmanUpdater(sensor), first


def positions(track_states, columns):
    return np.array([np.asarray(s.state_vector, dtype=float).ravel()[list(columns)] for s in track_states])


if __name__ == "__main__":
    # the Kalman filter's process noise: the best of a grid on the logged run (as the kernel filter is tuned on it)
    def log_error(q):
        run = track(*kalman(q, obs[:200]), obs[:200])
        return np.mean(np.sum((positions(run, (0, 2)) - states[:200]) ** 2, axis=1))

    q = min((0.01, 0.03, 0.1, 0.3, 1.0, 3.0), key=log_error)

    kbf = kb.tune_filter(kb.KernelBayesFilter(), states, obs, progress=False,
                         param_grid={"scale": (0.25, 0.5, 1.0), "reg_prior": (1e-3,), "reg_update": (1e-2, 1e-1)})
    learned = track(KernelBayesPredictor(kbf, step=second), KernelBayesUpdater(kbf),
                    GaussianState(zs[0][:, None], R, timestamp=start), zs)
    constant_velocity = track(*kalman(q, zs), zs)

    truths = [State(x[:, None], timestamp=when) for x, when in zip(truth, times)]
    for name, run, columns in (("kernel Bayes filter (learned)", learned, (0, 1)),
                               (f"Kalman, constant velocity (q={q})", constant_velocity, (0, 2))):
        ospa = OSPAMetric(c=1.0, p=1, measure=Euclidean(mapping=columns, mapping2=(0, 1)))
        distances = [ospa.compute_OSPA_distance([s], [x]).value for s, x in zip(run, truths)]
        mse = np.mean(np.sum((positions(run, columns) - truth) ** 2, axis=1))
        print(f"{name}: mean OSPA {np.mean(distances):.3f}, MSE {mse:.4f}")
