"""What a Stone Soup track step costs with a local kernel Bayes filter, against the filter's own step.

The filter is fitted with ``approximation="local"`` (default ``support``) on the noisy oscillation
at each log length T. One track is run through :class:`~kbfilter.stonesoup.KernelBayesPredictor`
and :class:`~kbfilter.stonesoup.KernelBayesUpdater` from a Gaussian prior, and the same steps are
timed three ways:

- ``own``: the filter's own ``predict`` and ``update`` on one belief (the floor);
- ``adapter``: the Stone Soup predictor and updater, whose states carry the belief as a sparse
  array of at most ``support`` weights, and which copy the filter without its belief;
- ``dense``: a copy of the filter holding a belief over all T states, set from the T weights a state
  would carry and read back as T weights (what a track step cost when states carried every weight).

It prints milliseconds a step (median of ``--repeats`` passes), the ratios to ``own``, and what one
stored state's belief holds (bytes). The adapter's figures should not grow with T; the dense ones do.

Usage:  python benchmarks/stonesoup_step.py [--T 10000 100000] [--steps 100] [--repeats 3]
"""

import argparse
import copy
import datetime
import statistics
import time

import numpy as np
from stonesoup.types.detection import Detection
from stonesoup.types.hypothesis import SingleHypothesis
from stonesoup.types.state import GaussianState

import kbfilter as kb
from kbfilter.stonesoup import PROJECTION_SAMPLES, KernelBayesPredictor, KernelBayesUpdater

START = datetime.datetime(2026, 1, 1)
SECOND = datetime.timedelta(seconds=1)
MEAN, COV = np.array([1.0, 0.0]), 0.05 * np.eye(2)


def adapter_run(kbf, zs):
    predictor, updater = KernelBayesPredictor(kbf, seed=0), KernelBayesUpdater(kbf)
    state = GaussianState(MEAN[:, None], COV, timestamp=START)
    for t, z in enumerate(zs, start=1):
        prediction = predictor.predict(state, timestamp=START + t * SECOND)
        state = updater.update(SingleHypothesis(prediction, Detection(z[:, None], timestamp=prediction.timestamp)))
    return state


def own_run(kbf, zs):
    track = kbf.with_belief(prior=np.random.default_rng(0).multivariate_normal(MEAN, COV, size=PROJECTION_SAMPLES))
    for z in zs:
        track.predict()
        track.update(z)
    return track


def dense_run(kbf, zs):
    weights = own_run(kbf, zs[:1]).weights
    for z in zs[1:]:
        track = copy.deepcopy(kbf).reset(weights=weights)
        track.predict()
        weights = track.weights
        track = copy.deepcopy(kbf).reset(weights=weights)
        track.update(z)
        weights = track.weights
    return weights


def per_step(run, kbf, zs, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        out = run(kbf, zs)
        times.append(1000 * (time.perf_counter() - start) / len(zs))
    return statistics.median(times), out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--T", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    system = kb.systems.Oscillation()
    zs = system.simulate(args.steps, rng=1)[1]
    print(f"oscillation, approximation='local', {args.steps} steps, median of {args.repeats}, "
          f"BLAS threads {kb.blas_threads()}")
    print(f"{'T':>9} {'own ms':>8} {'adapter ms':>11} {'dense ms':>9} {'adapter/own':>12} {'dense/own':>10} "
          f"{'state bytes':>12} {'dense bytes':>12}")
    for T in args.T:
        kbf = kb.KernelBayesFilter(approximation="local").fit(*system.simulate(T, rng=0))
        own_run(kbf, zs[:1])  # the neighbour index the prior needs, built once
        own, track = per_step(own_run, kbf, zs, args.repeats)
        adapter, state = per_step(adapter_run, kbf, zs, args.repeats)
        dense, _ = per_step(dense_run, kbf, zs, args.repeats)
        # the adapter's track is the filter's own (tested bit for bit in the suite)
        assert np.array_equal(state.state_vector.ravel(), track.x)
        held = state.weights.data.nbytes + state.weights.indices.nbytes + state.weights.indptr.nbytes
        print(f"{T:>9} {own:8.2f} {adapter:11.2f} {dense:9.2f} {adapter / own:12.2f} {dense / own:10.2f} "
              f"{held:12d} {8 * T:12d}")


if __name__ == "__main__":
    main()
