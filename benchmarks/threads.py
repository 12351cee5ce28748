"""BLAS threads and the filter's speed: kbfilter's default (one BLAS thread) against the
process's own BLAS default (one thread per core), in the same run on the same data.

Run it without ``OMP_NUM_THREADS`` / ``OPENBLAS_NUM_THREADS`` set, as a user would::

    python benchmarks/threads.py                 # idle machine
    python benchmarks/threads.py --busy 1        # another process keeps one core busy
    python benchmarks/threads.py --busy 1 --tune # and time the README's tracking example

Prints, per setting: fit time and milliseconds a step of the exact filter at T = 1,000 and 4,000,
and of the Nystrom filter at T = 20,000; with ``--tune``, the README example's wall time
(``tune_filter`` on oscillation, T = 1,000, then 200 steps); and the ratio default / one thread.
"""

import argparse
import multiprocessing
import os
import time

import numpy as np
from threadpoolctl import threadpool_info

import kbfilter as kb


def _spin():
    while True:
        pass


def step_time(kbf, obs, repeats=3):
    best = np.inf
    for _ in range(repeats):
        kbf.reset()
        start = time.perf_counter()
        for z in obs:
            kbf.predict()
            kbf.update(z)
        best = min(best, (time.perf_counter() - start) / len(obs))
    return 1e3 * best


def readme_example():
    start = time.perf_counter()
    system = kb.systems.Oscillation()
    states, obs = system.simulate(1000, rng=0)
    kbf = kb.tune_filter(kb.KernelBayesFilter(), states, obs, progress=False)
    _, test_obs = system.simulate(200, rng=1)
    for z in test_obs:
        kbf.predict()
        kbf.update(z)
    return time.perf_counter() - start


def measure(tune):
    system = kb.systems.Oscillation()
    _, test_obs = system.simulate(100, rng=1)
    rows = {}
    for T, approximation in ((1000, "exact"), (4000, "exact"), (20000, "nystrom")):
        states, obs = system.simulate(T, rng=0)
        start = time.perf_counter()
        kbf = kb.KernelBayesFilter(approximation=approximation).fit(states, obs)
        rows[f"T={T} {approximation}: fit s"] = time.perf_counter() - start
        rows[f"T={T} {approximation}: ms a step"] = step_time(kbf, test_obs)
    if tune:
        rows["README example: s"] = readme_example()
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--busy", type=int, default=0, help="processes that keep a core busy meanwhile")
    parser.add_argument("--tune", action="store_true", help="also time the README tracking example")
    args = parser.parse_args()
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        if name in os.environ:
            print(f"note: {name}={os.environ[name]} is set; unset it to measure the library's defaults")
    print(f"{os.cpu_count()} cores, BLAS: "
          + ", ".join(f"{i['internal_api']} ({i['num_threads']} threads)" for i in threadpool_info()
                      if i["user_api"] == "blas")
          + f", {args.busy} busy process(es)")
    spinners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(args.busy)]
    for p in spinners:
        p.start()
    try:
        results = {}
        for label, setting in (("kbfilter default (1 thread)", 1), ("BLAS default", None)):
            kb.set_blas_threads(setting)
            results[label] = measure(args.tune)
    finally:
        for p in spinners:
            p.terminate()
        kb.set_blas_threads(1)
    one, default = results.values()
    print(f"{'':32s} {'1 thread':>10s} {'BLAS default':>13s} {'default / 1':>12s}")
    for key in one:
        print(f"{key:32s} {one[key]:10.3f} {default[key]:13.3f} {default[key] / one[key]:11.1f}x")


if __name__ == "__main__":
    main()
