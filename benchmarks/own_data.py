"""A new user's data with the documented recipe: does the default get what the library can make?

The pendulum of ``docs/examples/own_data.py`` (angle and angular velocity on different scales,
range and bearing from a beacon), 1,200 steps per seed: the first 1,000 train (the last 200 of
them tune), the last 200 test. Three ways to build the same kernel Bayes filter:

- ``default``: ``tune_filter(KernelBayesFilter(), states, observations)``, nothing else given
  (standardised state and observation kernels, grids that follow the optimum);
- ``isotropic``: the same with one bandwidth for all columns and a grid that is never extended
  (``kernel_x=GaussianKernel(), kernel_z=GaussianKernel(), max_extensions=0``): the recipe as it
  was before standardising and extending became the default;
- ``by hand``: the columns of states and observations standardised by hand, isotropic kernels,
  and the default grid widened by hand on every axis (estimates mapped back to the user's units).

It prints each seed's test MSE, the means, the ratios default / by hand and default / isotropic,
and the EKF, UKF and particle filter given the true model.

Usage:  python benchmarks/own_data.py [--seeds 5] [--jobs 1]
"""

import argparse
import runpy
import time
import warnings
from pathlib import Path

import numpy as np

import kbfilter as kb
from kbfilter.filters.grids import DEFAULT_GRID

PENDULUM = runpy.run_path(str(Path(__file__).resolve().parents[1] / "docs" / "examples" / "own_data.py"))["Pendulum"]
#: the default grid widened by hand: each axis one or two values further on each side
WIDE_GRID = {"scale": (0.05, *DEFAULT_GRID["scale"], 8.0, 16.0),
             "reg_prior": (1e-8, 1e-7, *DEFAULT_GRID["reg_prior"], 10.0),
             "reg_update": (1e-8, 1e-7, *DEFAULT_GRID["reg_update"], 10.0)}


def mse(estimates, states):
    return float(np.mean(np.sum((estimates - states) ** 2, axis=1)))


def one_seed(seed, n_jobs):
    states, obs = PENDULUM().simulate(1200, rng=seed)
    xs, zs, x_test, z_test = states[:1000], obs[:1000], states[1000:], obs[1000:]
    row, tuned = {}, {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # grid-edge warnings of the recipes that cannot extend
        start = time.perf_counter()
        kbf = kb.tune_filter(kb.KernelBayesFilter(), xs, zs, progress=False, n_jobs=n_jobs)
        row["default"], tuned["default"] = mse(kbf.batch_filter(z_test)[0], x_test), time.perf_counter() - start
        extended = kbf.extended_params_
        start = time.perf_counter()
        kbf = kb.tune_filter(kb.KernelBayesFilter(kernel_x=kb.GaussianKernel(), kernel_z=kb.GaussianKernel()), xs, zs,
                             progress=False, n_jobs=n_jobs, max_extensions=0)
        row["isotropic"], tuned["isotropic"] = mse(kbf.batch_filter(z_test)[0], x_test), time.perf_counter() - start
        mx, sx, mz, sz = xs.mean(0), xs.std(0), zs.mean(0), zs.std(0)
        start = time.perf_counter()
        kbf = kb.tune_filter(kb.KernelBayesFilter(kernel_x=kb.GaussianKernel(), kernel_z=kb.GaussianKernel()),
                             (xs - mx) / sx, (zs - mz) / sz, param_grid=WIDE_GRID, progress=False, n_jobs=n_jobs,
                             max_extensions=0)
        row["by hand"] = mse(kbf.batch_filter((z_test - mz) / sz)[0] * sx + mx, x_test)
        tuned["by hand"] = time.perf_counter() - start
    for name, baseline in [("EKF", kb.filters.ExtendedKalman(PENDULUM())),
                           ("UKF", kb.filters.UnscentedKalman(PENDULUM())),
                           ("PF", kb.filters.ParticleFilter(PENDULUM(), n_particles=1000, rng=seed))]:
        row[name] = mse(baseline.batch_filter(z_test)[0], x_test)
    return row, tuned, extended


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=1, help="joblib workers inside each tuning (default 1)")
    args = parser.parse_args(argv)
    rows = []
    for seed in range(args.seeds):
        row, tuned, extended = one_seed(seed, args.jobs)
        rows.append(row)
        print(f"seed {seed}: " + "  ".join(f"{k} {v:.4f}" for k, v in row.items())
              + "  | tuning s: " + " ".join(f"{k} {v:.0f}" for k, v in tuned.items())
              + f"  | extended: {extended or 'none'}", flush=True)
    means = {k: float(np.mean([r[k] for r in rows])) for k in rows[0]}
    print("mean:   " + "  ".join(f"{k} {v:.4f}" for k, v in means.items()))
    ratio_hand = [r["default"] / r["by hand"] for r in rows]
    ratio_before = [r["default"] / r["isotropic"] for r in rows]
    print(f"default / by hand:   mean MSE ratio {means['default'] / means['by hand']:.3f} "
          f"(per seed {', '.join(f'{x:.2f}' for x in ratio_hand)})")
    print(f"default / isotropic: mean MSE ratio {means['default'] / means['isotropic']:.3f} "
          f"(per seed {', '.join(f'{x:.2f}' for x in ratio_before)})")


if __name__ == "__main__":
    main()
