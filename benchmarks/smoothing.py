"""Smoothing and consistency on the rotation and oscillation benchmarks.

Each run simulates a training sequence and an independent test sequence, tunes the kernel Bayes
filter on the last 200 training steps (``tune_filter``'s default grid, with its covariance
calibration), and on the test sequence records

- the filtered and smoothed MSE of the kernel Bayes filter, and their ratio;
- the same for the unscented Kalman filter that knows the true model, with its
  Rauch-Tung-Striebel smoother (the reference a tracking user would reach for), and for the
  particle filter (1,000 particles, true model) with forward filtering, backward smoothing;
- the mean NEES of the kernel Bayes filter before calibration (``covariance_scale=1``) and after,
  of its smoother, and of the UKF and the particle filter (1,000 particles, true model);
- the mean NIS of the kernel Bayes filter (its ``mahalanobis`` squared: the residual ``y`` against
  the predicted observation's covariance ``S``) and of the UKF.

Prints one table per system: means over runs, the Wilcoxon p of smoothed against filtered MSE,
and the 95 % band of a consistent filter's mean NEES and NIS.

Usage:  python benchmarks/smoothing.py [--runs 10] [--train-length 1000] [--test-length 200] [--jobs 1]
        [--approximation exact|nystrom|local] [--support 256]
"""

import argparse
import time
import warnings

import numpy as np
from joblib import Parallel, delayed
from scipy.stats import wilcoxon

import kbfilter as kb
from kbfilter.filters import ParticleFilter, UnscentedKalman

SYSTEMS = {"rotation": kb.systems.Rotation, "oscillation": kb.systems.Oscillation}


def _mse(means, truth):
    return float(np.mean(np.sum((means - truth) ** 2, axis=1)))


def _nees(truth, means, covs):
    return float(np.mean(kb.stats.nees(truth, means, covs)))


def _nis(filt, zs):
    """The mean NIS of a filter run over ``zs`` from its current belief, from its ``mahalanobis``."""
    squares = []
    for z in zs:
        filt.predict()
        filt.update(z)
        squares.append(filt.mahalanobis**2)
    return float(np.mean(squares))


def one_run(name, seed, train_length, test_length, approximation="exact", support=256):
    system = SYSTEMS[name]()
    rng = np.random.default_rng(seed)
    states, obs = system.simulate(train_length, rng)
    truth, zs = system.simulate(test_length, rng)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        start = time.perf_counter()
        kbf = kb.tune_filter(kb.KernelBayesFilter(approximation=approximation, support=support), states, obs,
                             progress=False)
        tune_s = time.perf_counter() - start
        start = time.perf_counter()
        means, covs, _, _ = kbf.batch_filter(zs)
        filter_s = time.perf_counter() - start
        start = time.perf_counter()
        smoothed, smoothed_covs = kbf.reset().smooth(zs)
        smooth_s = time.perf_counter() - start
        nis_kbf = _nis(kbf.reset(), zs)
        ukf = UnscentedKalman(system)
        ukf.initialize(*system.initial_belief(zs[0]))
        nis_ukf = _nis(ukf, zs[1:])
        ukf_means, ukf_covs, _, _ = UnscentedKalman(system).batch_filter(zs)
        rts, rts_covs = UnscentedKalman(system).smooth(zs)
        pf_means, pf_covs, _, _ = ParticleFilter(system, 1000, rng=seed).batch_filter(zs)
        pf_smoothed, _ = ParticleFilter(system, 1000, rng=seed).smooth(zs)
    c = kbf.covariance_scale
    return {
        "kbf": _mse(means, truth), "kbf_smoothed": _mse(smoothed, truth),
        "ukf": _mse(ukf_means, truth), "ukf_rts": _mse(rts, truth), "pf": _mse(pf_means, truth),
        "pf_smoothed": _mse(pf_smoothed, truth),
        "nees_kbf_uncalibrated": _nees(truth, means, covs / c), "nees_kbf": _nees(truth, means, covs),
        "nees_kbf_smoothed": _nees(truth, smoothed, smoothed_covs), "nees_ukf": _nees(truth, ukf_means, ukf_covs),
        "nees_ukf_rts": _nees(truth, rts, rts_covs), "nees_pf": _nees(truth, pf_means, pf_covs),
        "nis_kbf": nis_kbf, "nis_ukf": nis_ukf,
        "covariance_scale": c, "tune_s": tune_s, "filter_ms": 1000 * filter_s / test_length,
        "smooth_ms": 1000 * smooth_s / test_length,
    }


def report(name, rows, test_length):
    col = {k: np.array([r[k] for r in rows]) for k in rows[0]}
    print(f"\n{name}: {len(rows)} runs (tuned kernel Bayes filter; UKF and particle filter know the model)")
    print(f"{'':28}{'filtered':>10}{'smoothed':>10}{'ratio':>8}{'p (Wilcoxon)':>14}")
    for label, f, s in (("kernel Bayes filter", "kbf", "kbf_smoothed"), ("UKF / RTS smoother", "ukf", "ukf_rts"),
                        ("particle filter / FFBS", "pf", "pf_smoothed")):
        p = wilcoxon(col[f], col[s]).pvalue if len(rows) > 1 else float("nan")
        print(f"{label:28}{col[f].mean():>10.4f}{col[s].mean():>10.4f}{col[s].mean() / col[f].mean():>8.3f}"
              f"{p:>14.2g}")
    low, high = kb.stats.chi2_band(2, len(rows) * test_length)
    print(f"mean NEES (dim_x = 2; 95 % band over {len(rows) * test_length} independent steps {low:.2f}-{high:.2f}):")
    for label, key in (("kernel Bayes filter, uncalibrated", "nees_kbf_uncalibrated"),
                       ("kernel Bayes filter, calibrated", "nees_kbf"),
                       ("kernel smoother, calibrated", "nees_kbf_smoothed"),
                       ("UKF", "nees_ukf"), ("UKF RTS smoother", "nees_ukf_rts"), ("particle filter", "nees_pf")):
        print(f"  {label:36}{col[key].mean():>8.2f}  (runs {col[key].min():.2f}-{col[key].max():.2f})")
    print("mean NIS (dim_z = 2; the same band):")
    for label, key in (("kernel Bayes filter", "nis_kbf"), ("UKF", "nis_ukf")):
        print(f"  {label:36}{col[key].mean():>8.2f}  (runs {col[key].min():.2f}-{col[key].max():.2f})")
    print(f"covariance_scale chosen: {col['covariance_scale'].mean():.2f} (runs {col['covariance_scale'].min():.2f}-"
          f"{col['covariance_scale'].max():.2f}); ms a step: filter {col['filter_ms'].mean():.2f}, smoother "
          f"{col['smooth_ms'].mean():.2f} (forward pass included); tuning {col['tune_s'].mean():.0f} s a run")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--train-length", type=int, default=1000)
    parser.add_argument("--test-length", type=int, default=200)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--systems", nargs="+", default=list(SYSTEMS), choices=list(SYSTEMS))
    parser.add_argument("--approximation", default="exact", choices=["exact", "nystrom", "local"],
                        help="the kernel Bayes filter's path (default exact)")
    parser.add_argument("--support", type=int, default=256, help="its support with --approximation local")
    args = parser.parse_args()
    print(f"kernel Bayes filter: approximation={args.approximation!r}"
          + (f", support={args.support}" if args.approximation == "local" else ""))
    for name in args.systems:
        rows = Parallel(n_jobs=args.jobs)(delayed(one_run)(name, seed, args.train_length, args.test_length,
                                                           args.approximation, args.support)
                                          for seed in range(args.runs))
        report(name, rows, args.test_length)


if __name__ == "__main__":
    main()
