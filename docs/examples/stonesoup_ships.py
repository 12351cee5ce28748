"""Recorded ships tracked in Stone Soup's loop with the motion learned from other ships, against
Stone Soup's own Kalman filter with a constant-velocity model, scored with Stone Soup's OSPA metric.

The ships are the Solent AIS recording's: the filters are fitted on 70 % of the ships and track
the others, from position fixes with 10 m errors and 10-step stretches missing. The constant-
velocity model's process noise is chosen on the training ships (never the tracked ones); the
same model is the learned filter's sensor and first belief.
"""

import datetime

import numpy as np
from stonesoup.measures import Euclidean
from stonesoup.metricgenerator.ospametric import OSPAMetric
from stonesoup.models.measurement.linear import LinearGaussian
from stonesoup.models.transition.linear import LinearGaussianTimeInvariantTransitionModel
from stonesoup.predictor.kalman import KalmanPredictor
from stonesoup.types.detection import Detection
from stonesoup.types.hypothesis import SingleHypothesis
from stonesoup.types.state import GaussianState, State
from stonesoup.updater.kalman import KalmanUpdater

import kbfilter as kb
from kbfilter.datasets import load_solent
from kbfilter.stonesoup import LearnedMotionPredictor, LearnedMotionUpdater
from kbfilter.systems.tracking import ConstantVelocity, PositionFixes, dropouts

train, test = load_solent().split(test_size=0.3, random_state=0)
sensor = PositionFixes(10.0)
cv = ConstantVelocity.fitted(train.tracks, train.step, sensor=sensor)
fixes = [sensor.observe(t, rng=np.random.default_rng([0, i])) for i, t in enumerate(train.tracks)]
learned = kb.LearnedMotionFilter(cv, inputs=(2, 3), n_particles=500, random_state=0).fit(train.tracks, fixes)

start, step = datetime.datetime(2016, 1, 12, 13, 2), datetime.timedelta(seconds=train.step)


def run(predictor, updater, zs):
    """Stone Soup's single-target loop: predict to each fix's time, update with the fix, keep the
    prediction where the fix is missing."""
    mean, cov = cv.initial_belief(zs[0])
    state, out = GaussianState(mean[:, None], cov, timestamp=start), []
    for t, z in enumerate(zs):
        if t > 0:
            state = predictor.predict(state, timestamp=start + t * step)
            if z is not None:
                state = updater.update(SingleHypothesis(state, Detection(z[:, None], timestamp=state.timestamp)))
        out.append(state)
    return out


if __name__ == "__main__":
    methods = {
        "learned motion": (LearnedMotionPredictor(learned, step=step), LearnedMotionUpdater(learned)),
        "Kalman, constant velocity": (
            KalmanPredictor(LinearGaussianTimeInvariantTransitionModel(cv.F, cv.process_cov)),
            KalmanUpdater(LinearGaussian(ndim_state=4, mapping=(0, 1), noise_covar=sensor.observation_cov))),
    }
    ospa = OSPAMetric(c=100.0, p=1, measure=Euclidean(mapping=(0, 1), mapping2=(0, 1)))
    errors = {name: [] for name in methods}
    distances = {name: [] for name in methods}
    for i in np.argsort([-len(t) for t in test.tracks], kind="stable")[:3]:  # the three longest (first on ties)
        truth = test.tracks[i]
        zs, missing = dropouts(sensor.observe(truth, rng=np.random.default_rng([1, i])), rng=i, rate=0.02,
                               length=(10, 10))
        truths = [State(x[:, None], timestamp=start + t * step) for t, x in enumerate(truth)]
        line = []
        for name, (predictor, updater) in methods.items():
            states = run(predictor, updater, zs)
            estimate = np.array([np.asarray(s.state_vector, dtype=float).ravel()[:2] for s in states])
            errors[name].append(np.sum((estimate - truth[:, :2]) ** 2, axis=1))
            distances[name] += [ospa.compute_OSPA_distance([s], [x]).value for s, x in zip(states, truths)]
            line.append(f"{name} {np.sqrt(errors[name][-1].mean()):.1f} m")
        speed = np.mean(np.hypot(truth[:, 2], truth[:, 3]))
        print(f"ship {test.vehicles[i]} ({len(truth)} steps, {missing.sum()} without a fix, {speed:.1f} m/s): "
              f"position RMSE " + ", ".join(line))
    for name in methods:
        print(f"{name}: mean OSPA {np.mean(distances[name]):.1f} m, "
              f"position RMSE {np.sqrt(np.concatenate(errors[name]).mean()):.1f} m")
