"""Fitting the local kernel Bayes filter on a log given as dask arrays, on a ``distributed`` cluster.

The log is made on the workers, chunk after chunk (a rotation with damping and Gaussian noise,
``x_{t+1} = a R(omega) x_t + N(0, q^2 I)``, observed as ``z = x + N(0, r^2 I)``; each chunk starts
from the last state of the one before, so it is one sequence), and never passes through this
process. The fit checks it, fits the kernels from its summaries and learns the transition on the
workers; only the fitted model's arrays come here. Printed: the log's size, the fit's wall time,
each worker's peak resident memory, this process's, the time of a filter step, and, on a smaller
log, the same fit in memory with the largest difference between the two filters' estimates.

    python benchmarks/dask_fit.py --T 10000000 --chunk 1000000
    python benchmarks/dask_fit.py --T 200000 --chunk 20000 --compare   # against the in-memory fit
"""

import argparse
import resource
import time

import numpy as np
from scipy.signal import lfilter

A, OMEGA, Q, R = 0.999, 0.05, 0.05, 0.1


def _chunk(start_state, n, seed):
    """n steps of the rotation as a complex AR(1), from ``start_state`` (one filter call)."""
    rng = np.random.default_rng(seed)
    noise = Q * (rng.standard_normal(n) + 1j * rng.standard_normal(n))
    coef = A * np.exp(1j * OMEGA)
    z0 = complex(*start_state)
    path = lfilter([1.0], [1.0, -coef], noise, zi=np.array([coef * z0]))[0]
    states = np.column_stack([path.real, path.imag])
    return states, states + R * rng.standard_normal(states.shape)


def log_on_workers(T, chunk):
    import dask
    import dask.array as da

    sizes = [chunk] * (T // chunk) + ([T % chunk] if T % chunk else [])
    pieces, last = [], dask.delayed(np.zeros)(2)
    for k, n in enumerate(sizes):
        piece = dask.delayed(_chunk, nout=2)(last, n, k)
        last = piece[0][-1]
        pieces.append(piece)
    states = da.concatenate([da.from_delayed(p[0], (n, 2), np.float64) for p, n in zip(pieces, sizes)])
    obs = da.concatenate([da.from_delayed(p[1], (n, 2), np.float64) for p, n in zip(pieces, sizes)])
    return states, obs


def peak_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--T", type=int, default=10**7)
    parser.add_argument("--chunk", type=int, default=10**6)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--memory-limit", default="6GiB", help="per worker")
    parser.add_argument("--compare", action="store_true", help="also fit the same log in memory")
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()

    from distributed import Client, LocalCluster

    import kbfilter as kb

    with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True, memory_limit=args.memory_limit,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        states, obs = log_on_workers(args.T, args.chunk)
        print(f"log: T = {args.T:,} states in {len(states.chunks[0])} chunks of {args.chunk:,}; "
              f"{(states.nbytes + obs.nbytes) / 2**20:.0f} MiB; {args.workers} workers of {args.memory_limit}")
        start = time.perf_counter()
        kbf = kb.KernelBayesFilter(approximation="local").fit(states, obs)
        fit_s = time.perf_counter() - start
        workers = client.run(peak_mib)
        print(f"dask fit: {fit_s:.1f} s wall")
        for address, mib in sorted(workers.items()):
            print(f"  worker {address}: peak {mib:.0f} MiB")
        print(f"  this process: peak {peak_mib():.0f} MiB (the fitted model's arrays)")
        test_states, test_obs = _chunk(np.zeros(2), args.steps, 10**6)
        kbf.batch_filter(test_obs[:10])
        kbf.reset()
        start = time.perf_counter()
        est = kbf.batch_filter(test_obs)[0]
        step_ms = 1e3 * (time.perf_counter() - start) / args.steps
        print(f"filter step: {step_ms:.2f} ms; MSE {np.mean((est - test_states) ** 2):.4f} "
              f"(observation-only {np.mean((test_obs - test_states) ** 2):.4f})")
        if args.compare:
            import dask

            X, Z = dask.compute(*log_on_workers(args.T, args.chunk))  # the same log, made again
            start = time.perf_counter()
            in_memory = kb.KernelBayesFilter(approximation="local").fit(X, Z)
            mem_s = time.perf_counter() - start
            kbf.reset()
            diff = np.max(np.abs(in_memory.batch_filter(test_obs)[0] - kbf.batch_filter(test_obs)[0]))
            print(f"in-memory fit: {mem_s:.1f} s; dask / in-memory {fit_s / mem_s:.2f}; "
                  f"largest estimate difference {diff:.2e}")


if __name__ == "__main__":
    main()
