"""How the controlled kernel Bayes filter scales with the length T of its training run.

The filter learns the transition given the control, with a product kernel on state and control.
``approximation="exact"`` holds that transition as a dense n x T cross Gram matrix and factors the
n x n product Gram matrix; ``approximation="nystrom"`` factors the product kernel on landmark pairs
of state and control (pivoted Cholesky) and keeps O((n + T) r). Both run on the same data with the
same hyperparameters; the table gives the fit time, the time a step (best of three passes over the
test run), the peak memory of fit + filtering (tracemalloc, a second fit), the test MSE and the
ratios against ``exact`` wherever it runs.

Part ``scalar``: ``kb.systems.ControlledLinearGaussian``, x_t = 0.8 x_{t-1} + u_t + N(0, 0.05),
z = x + N(0, 0.2), u uniform on [-1, 1]; the Kalman filter that knows the model is the floor.
Part ``robot``: the robot in its room (odometry as the control, a 16 x 64 camera image, blurred),
one training run of each length, the 200-step test run of the same seed.

    python benchmarks/controlled_scale.py                               # both parts (about 10 min on 2 cores)
    python benchmarks/controlled_scale.py --part scalar --sizes 1000 4000 16000 64000 --exact-max 8000
    python benchmarks/controlled_scale.py --part robot --robot-sizes 1000 5000

BLAS runs with the library's defaults unless ``--blas-threads`` is given.
"""

import argparse
import time
import tracemalloc
import warnings

import numpy as np
from threadpoolctl import threadpool_limits

import kbfilter as kb

SCALAR_PARAMS = dict(scale=0.5, reg_prior=1e-3, reg_update=1e-2)
ROBOT_PARAMS = dict(scale=0.5, scale_z=0.5, reg_prior=1e-3, reg_update=1e-2)


#: x_t = 0.8 x_{t-1} + u_t + N(0, 0.05), z = x + N(0, 0.2), u uniform on [-1, 1]
CONTROLLED = kb.systems.ControlledLinearGaussian(F=[[0.8]], B=[[1.0]], H=[[1.0]], Q=[[0.05]], R=[[0.2]])


def kalman_mse(states, controls, obs):
    kalman = kb.filters.ExtendedKalman(CONTROLLED).initialize(np.zeros(1), CONTROLLED.stationary_cov)
    return _mse(kalman.batch_filter(obs, us=controls)[0], states)


def _mse(means, states):
    return float(np.mean(np.sum((means[:, :2] - states[:, :2]) ** 2, axis=1)))


def measure(approximation, params, train, test):
    """Fit seconds, best-of-three ms a step, MSE, the transition's landmark pairs, peak MB."""
    (X, U, Z), (Xt, Ut, Zt) = train, test
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", kb.NumericalWarning)
        start = time.perf_counter()
        kbf = kb.KernelBayesFilter(approximation=approximation, **params).fit(X, Z, controls=U)
        fit_s = time.perf_counter() - start
        passes = []
        for _ in range(3):
            kbf.reset()
            start = time.perf_counter()
            means = kbf.batch_filter(Zt, us=Ut)[0]
            passes.append(time.perf_counter() - start)
        tracemalloc.start()
        again = kb.KernelBayesFilter(approximation=approximation, **params).fit(X, Z, controls=U)
        again.batch_filter(Zt[:5], us=Ut[:5])
        peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
    rank = getattr(kbf.model_.transition, "rank", None)
    return dict(fit_s=fit_s, ms=1e3 * min(passes) / len(Zt), mse=_mse(means, Xt), rank=rank, mb=peak)


def table(title, rows, floor=None):
    print(f"\n{title}")
    head = f"{'T':>7} {'variant':>8} {'fit s':>8} {'ms/step':>8} {'peak MB':>8} {'MSE':>9} {'rank':>5} " \
           f"{'fit x':>7} {'step x':>7} {'MB x':>6} {'MSE / exact':>11}"
    print(head + ("" if floor is None else f" {'MSE / Kalman':>12}"))
    for T, by_variant in rows:
        exact = by_variant.get("exact")
        for name, r in by_variant.items():
            ratios = ("", "", "", "") if exact is None or name == "exact" else (
                f"{exact['fit_s'] / r['fit_s']:.1f}", f"{exact['ms'] / r['ms']:.1f}", f"{exact['mb'] / r['mb']:.1f}",
                f"{r['mse'] / exact['mse']:.4f}")
            line = (f"{T:>7} {name:>8} {r['fit_s']:>8.2f} {r['ms']:>8.2f} {r['mb']:>8.1f} {r['mse']:>9.5f} "
                    f"{r['rank'] if r['rank'] is not None else '-':>5} {ratios[0]:>7} {ratios[1]:>7} {ratios[2]:>6} "
                    f"{ratios[3]:>11}")
            print(line + ("" if floor is None else f" {r['mse'] / floor[T]:>12.3f}"), flush=True)


def compared(sizes, exact_max, simulate, params, test_steps):
    """For each T: both variants (exact only up to ``exact_max``) trained on ``simulate(T, rng)``
    and run on the ``test_steps`` drawn after it; returns the rows and each test run."""
    rows, tests = [], {}
    for T in sizes:
        rng = np.random.default_rng(0)
        train, tests[T] = simulate(T, rng), simulate(test_steps, rng)
        rows.append((T, {name: measure(name, params, train, tests[T]) for name in ("exact", "nystrom")
                         if name == "nystrom" or T <= exact_max}))
    return rows, tests


def scalar_part(sizes, exact_max):
    rows, tests = compared(sizes, exact_max, CONTROLLED.simulate, SCALAR_PARAMS, 300)
    table("controlled scalar system, 300 test steps (the Kalman filter knows the model)", rows,
          {T: kalman_mse(*test) for T, test in tests.items()})


def robot_part(sizes, exact_max):
    rows, _ = compared(sizes, exact_max, kb.systems.RobotInRoom().simulate, ROBOT_PARAMS, 200)
    table(f"robot in its room, position MSE over 200 test steps, {ROBOT_PARAMS}", rows)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=("scalar", "robot", "both"), default="both")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 4000, 8000, 32000])
    parser.add_argument("--robot-sizes", type=int, nargs="+", default=[1000, 5000])
    parser.add_argument("--exact-max", type=int, default=8000, help="largest T the exact variant runs at")
    parser.add_argument("--blas-threads", type=int, default=None)
    args = parser.parse_args(argv)
    with threadpool_limits(args.blas_threads):
        if args.part in ("scalar", "both"):
            scalar_part(args.sizes, args.exact_max)
        if args.part in ("robot", "both"):
            robot_part(args.robot_sizes, args.exact_max)


if __name__ == "__main__":
    main()
