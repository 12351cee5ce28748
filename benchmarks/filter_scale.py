"""How the kernel Bayes filter scales with the length T of its training run.

Part 1, speed (oscillation system): for each T, the fit time, the time a filtering step, the
peak memory of fit + filtering (tracemalloc) and the test MSE of

- ``exact``: dense T x T transition and projection (only where they fit: T <= --exact-max),
- ``nystrom``: Nystrom low-rank kernels, low-rank transition (the scalable path),
- ``nystrom-knn``: Nystrom low-rank kernels, localized kNN transition (sparse),
- ``local``: the belief on at most ``--support`` training states (``approximation="local"``, the
  kNN transition; a step that does not grow with T),

all on the same data with the same hyperparameters, with the speed and MSE ratios against
``exact`` at every T where it runs, and against ``nystrom-knn`` (the scalable path before the local
one). A step's time is the best of ``--passes`` passes over the test run, each from the uniform
start.

Part 2, accuracy against T (rotation and oscillation): the scalable filter tuned by
``tune_filter`` at each T (the ``kbf-iw-nystrom`` benchmark method, several seeds) against the
particle filter that knows the true model (``pf``; on the moving sprite, ``oracle-pf``, which also
knows what drew each frame), as a table and a PNG.

    python benchmarks/filter_scale.py                        # both parts (about 40 min on 2 cores)
    python benchmarks/filter_scale.py --part speed           # part 1 only (about 3 min), the filter's defaults
    python benchmarks/filter_scale.py --part speed --scale 0.25 --reg-prior 1e-4 --reg-update 0.1   # narrow
    python benchmarks/filter_scale.py --part speed --T 100000 1000000 --variants local --passes 1   # long logs
    python benchmarks/filter_scale.py --part curve --curve-seeds 5 --curve-T 1000 4000 20000
    python benchmarks/filter_scale.py --part curve --curve-method kbf-iw-local --curve-T 1000 10000 100000
    python benchmarks/filter_scale.py --part curve --curve-method kbf-iw-local --curve-T 1000000 --curve-support 1024 \
        --curve-validation-length 1000
    python benchmarks/filter_scale.py --part curve --curve-systems sprite --curve-method kbf-iw-blur-local \
        --curve-reference oracle-pf --curve-T 1000 10000 100000 --curve-seeds 1 --jobs 1   # images
    python benchmarks/filter_scale.py --part stream --stream 100000 10000   # partial_fit against one fit

BLAS runs with the library's defaults unless ``--blas-threads`` is given.
"""

import argparse
import json
import time
import tracemalloc
import warnings
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

import kbfilter as kb
from kbfilter.bench import CATALOGUE, run_bench, summarise

VARIANTS = {
    "exact": dict(approximation="exact"),
    "nystrom": dict(approximation="nystrom"),
    "nystrom-knn": dict(approximation="nystrom", transition="knn"),
    "local": dict(approximation="local"),
}


def _mse(means, states):
    return float(np.mean(np.sum((means - states) ** 2, axis=1)))


def measure(variant, params, data, test, passes=3):
    """Fit time, best-of-``passes`` ms a step, MSE, the ranks used, and the peak memory (a second fit
    under tracemalloc, so that tracing does not slow the timed one)."""
    (X, Z), (Xt, Zt) = data, test
    template = kb.KernelBayesFilter(**VARIANTS[variant], **params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", kb.NumericalWarning)
        start = time.perf_counter()
        kbf = template.fit(X, Z)
        fit_s = time.perf_counter() - start
        times = []
        for _ in range(passes):
            kbf.reset()
            start = time.perf_counter()
            means = kbf.batch_filter(Zt)[0]
            times.append((time.perf_counter() - start) / len(Zt))
        rule = kbf.rule_  # None on the local path: no kernel is approximated
        ranks = [None, None] if rule is None else [getattr(k, "rank_", None) for k in (rule.kernel_x_, rule.kernel_z_)]
        del kbf
        tracemalloc.start()
        again = kb.KernelBayesFilter(**VARIANTS[variant], **params).fit(X, Z)
        again.batch_filter(Zt[:10])
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return {"fit_s": fit_s, "ms_step": 1e3 * min(times), "mse": _mse(means, Xt), "peak_mb": peak / 2**20,
            "rank_x": ranks[0], "rank_z": ranks[1]}


def speed_part(lengths, exact_max, params, steps, seed, variants=tuple(VARIANTS), nystrom_max=None, passes=3):
    system = kb.systems.Oscillation()
    rows = []
    print(f"\nPart 1: speed on oscillation, hyperparameters {params}, {steps} test steps")
    header = (f"{'T':>7} {'variant':<12} {'ranks':>9} {'fit s':>8} {'ms/step':>8} {'peak MB':>8} {'MSE':>8} "
              f"{'speed-up':>9} {'MSE ratio':>9} {'vs nystrom-knn: speed-up':>24} {'MSE ratio':>9}")
    print(header)
    print("-" * len(header))
    for T in lengths:
        rng = np.random.default_rng([seed, T])
        data, test = system.simulate(T, rng), system.simulate(steps, rng)
        exact = nystrom = None
        for variant in variants:
            if (variant == "exact" and T > exact_max) or (variant.startswith("nystrom") and nystrom_max is not None
                                                          and T > nystrom_max):
                continue
            row = dict(T=T, variant=variant, **measure(variant, params, data, test, passes))
            if variant == "exact":
                exact = row
            if variant == "nystrom-knn":
                nystrom = row
            ratios = ""
            for base, key in ((exact, ""), (nystrom, "_nystrom_knn")):
                if base is not None and base is not row:
                    row["speedup" + key] = base["ms_step"] / row["ms_step"]
                    row["mse_ratio" + key] = row["mse"] / base["mse"]
                    ratios += f" {row['speedup' + key]:>8.1f}x {row['mse_ratio' + key]:>9.4f}"
                else:
                    ratios += f" {'':>9} {'':>9}"
            rows.append(row)
            ranks = "-" if row["rank_x"] is None else f"{row['rank_x']}/{row['rank_z']}"
            print(f"{T:>7} {variant:<12} {ranks:>9} {row['fit_s']:>8.2f} {row['ms_step']:>8.3f} "
                  f"{row['peak_mb']:>8.0f} {row['mse']:>8.4f}{ratios}", flush=True)
    return rows


def stream_part(T, more, params, seed):
    """A log that grows: fit on T steps, then ``partial_fit`` on ``more`` steps, against one fit on
    all of them (the local path, same kernels)."""
    system = kb.systems.Oscillation()
    rng = np.random.default_rng([seed, T])
    (X, Z), (X2, Z2), (_, Zt) = system.simulate(T, rng), system.simulate(more, rng), system.simulate(200, rng)
    print(f"\nPart 3: streaming on oscillation, T = {T} then {more} more, hyperparameters {params}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", kb.NumericalWarning)
        start = time.perf_counter()
        first = kb.KernelBayesFilter(approximation="local", **params).fit(X, Z)
        fit_s = time.perf_counter() - start
        # the kernels fit chose, passed in fitted, so that one fit on everything uses them too
        kernels = dict(kernel_x=first.kernel_x_, kernel_z=first.model_.kernel_z)
        start = time.perf_counter()
        first.partial_fit(X2, Z2)
        partial_s = time.perf_counter() - start
        start = time.perf_counter()
        # (fitted kernels are used as they are: their scale is already in them)
        unscaled = {k: v for k, v in params.items() if k != "scale"}
        whole = kb.KernelBayesFilter(approximation="local", **unscaled, **kernels).fit([X, X2], [Z, Z2])
        whole_s = time.perf_counter() - start
        gap = float(np.max(np.abs(first.batch_filter(Zt)[0] - whole.batch_filter(Zt)[0])))
    print(f"fit on {T}: {fit_s:.1f} s; partial_fit on {more} more: {partial_s:.1f} s; one fit on all {T + more}: "
          f"{whole_s:.1f} s ({whole_s / partial_s:.1f}x); largest difference of the estimates: {gap:.1e}")
    return {"fit_s": fit_s, "partial_fit_s": partial_s, "whole_fit_s": whole_s, "max_difference": gap}


def curve_part(lengths, seeds, jobs, out, method="kbf-iw-nystrom", systems=("rotation", "oscillation"),
               reference="pf", support=None, validation_length=None, filter_seeds=1, first_run=0):
    fixed = None if support is None else {"support": (support,)}
    runs = f"{seeds} seeds" if first_run == 0 else f"runs {first_run}-{first_run + seeds - 1}"
    print(f"\nPart 2: tuned accuracy against T ({runs}; {method} tuned on its grid"
          f"{'' if support is None else f', support {support}'}"
          f"{'' if validation_length is None else f', validated on the last {validation_length} steps'}, "
          f"{reference} knows the model)")
    table = {}
    for system in systems:
        for T in lengths:
            start = time.perf_counter()
            rows = run_bench(system, runs=seeds, train_length=T, test_length=200,
                             methods=(method, reference), n_jobs=jobs, progress=False, grid_axes=fixed,
                             validation_length=validation_length, filter_seeds=filter_seeds, first_run=first_run,
                             on_error="raise")  # the ratios below pair every run's two methods
            summary = summarise(rows, reference=method)
            wall = time.perf_counter() - start
            tune = float(np.mean([r["tune_s"][method] for r in rows]))
            entry = {name: {"mean": s["mse_mean"], "std": s["mse_std"], "ms_per_step": s["ms_per_step"]}
                     for name, s in summary.items()}
            entry["tune_s"], entry["wall_s"] = tune, wall
            entry["params"] = [r["params"][method] for r in rows]
            entry["wins_over_reference"] = summary[reference]["wins"]
            entry["run_ratios"] = [r["mse"][method] / r["mse"][reference] for r in rows]
            entry["ratio_to_reference"] = float(np.mean(entry["run_ratios"]))
            # against the reference's first run alone: what a single-seed curve reports
            entry["ratio_to_first_run"] = float(np.mean([r["mse"][method] / r["mse_per_seed"][reference][0]
                                                         for r in rows]))
            table[(system, T)] = entry
            against_first = ("" if filter_seeds == 1 else
                             f"(against the first {reference} run alone: {entry['ratio_to_first_run']:.3f})   ")
            print(f"{system:<12} T={T:>7}  {method} {entry[method]['mean']:.4f} "
                  f"± {entry[method]['std']:.4f}   {reference} {entry[reference]['mean']:.4f} "
                  f"± {entry[reference]['std']:.4f}   mean ratio {entry['ratio_to_reference']:.3f}   "
                  f"({entry['wins_over_reference']}/{seeds} runs below {reference})   "
                  f"{against_first}"
                  f"tuning {tune:.0f} s a run, {wall:.0f} s wall", flush=True)
            print(f"{'':<12} per run (from run {first_run}): "
                  + " ".join(f"{ratio:.4f}" for ratio in entry["run_ratios"]), flush=True)
    _plot(table, lengths, systems, method, reference, out / f"filter_scale_accuracy_{method}.png")
    return table


def _plot(table, lengths, systems, method, reference, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(systems), figsize=(4.5 * len(systems), 3.6), squeeze=False)
    for ax, system in zip(axes[0], systems):
        kbf = [table[(system, T)][method] for T in lengths]
        ax.errorbar(lengths, [k["mean"] for k in kbf], yerr=[k["std"] for k in kbf], marker="o", capsize=3,
                    label=f"kernel Bayes filter ({method}, tuned)")
        # the test runs differ from one T to the next, so the reference is drawn at each T
        ax.plot(lengths, [table[(system, T)][reference]["mean"] for T in lengths], "k--", marker="s",
                label=CATALOGUE[reference].description)
        ax.set_xscale("log")
        ax.set_xlabel("training length T")
        ax.set_ylabel("test MSE")
        ax.set_title(system)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"wrote {path}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("speed", "curve", "both", "stream"), default="both")
    parser.add_argument("--stream", type=int, nargs=2, default=[100000, 10000], metavar=("T", "MORE"),
                        help="stream part: fit on T steps, then partial_fit on MORE")
    parser.add_argument("--T", type=int, nargs="+", default=[1000, 4000, 20000, 100000], help="speed part's T")
    parser.add_argument("--exact-max", type=int, default=4000, help="largest T the exact filter is run at")
    parser.add_argument("--nystrom-max", type=int, default=None, help="largest T the Nystrom variants are run at")
    parser.add_argument("--variants", nargs="+", choices=tuple(VARIANTS), default=list(VARIANTS))
    parser.add_argument("--support", type=int, default=256, help="the local variant's support")
    parser.add_argument("--passes", type=int, default=3, help="timed passes over the test run (the best counts)")
    parser.add_argument("--steps", type=int, default=200, help="test steps")
    parser.add_argument("--scale", type=float, default=1.0, help="the filter's default")
    parser.add_argument("--reg-prior", type=float, default=1e-2)
    parser.add_argument("--reg-update", type=float, default=1e-2)
    parser.add_argument("--curve-T", type=int, nargs="+", default=[1000, 4000, 20000])
    parser.add_argument("--curve-seeds", type=int, default=5)
    parser.add_argument("--curve-method", default="kbf-iw-nystrom", help="the tuned method of the curve")
    parser.add_argument("--curve-systems", nargs="+", default=["rotation", "oscillation"])
    parser.add_argument("--curve-reference", default="pf",
                        help="the method that knows the model (default pf; oracle-pf for sprite)")
    parser.add_argument("--curve-support", type=int, default=None,
                        help="the curve's local filter holds its belief on this many training states (default: "
                             "the method's own, 256)")
    parser.add_argument("--curve-validation-length", type=int, default=None,
                        help="tune on the last this many training steps (default: the bench's, 200)")
    parser.add_argument("--curve-filter-seeds", type=int, default=1,
                        help="runs of the reference particle filter on each test run, its MSE their mean (the "
                             "first run is the one a single-seed curve makes)")
    parser.add_argument("--curve-first-run", type=int, default=0,
                        help="start at this run of the root seed (5 with --curve-seeds 5: runs 5-9, extending a "
                             "five-seed curve)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--blas-threads", type=int, default=None, help="default: the BLAS library's own")
    parser.add_argument("--out", type=Path, default=Path("results"))
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    params = dict(scale=args.scale, reg_prior=args.reg_prior, reg_update=args.reg_update)
    VARIANTS["local"]["support"] = args.support
    blas = [(i.get("internal_api"), i.get("num_threads")) for i in threadpool_info()]
    print(f"BLAS pools (api, threads): {blas}; --blas-threads {args.blas_threads}")
    results = {"params": params, "blas": blas}
    with threadpool_limits(args.blas_threads):
        if args.part in ("speed", "both"):
            results["speed"] = speed_part(args.T, args.exact_max, params, args.steps, args.seed, args.variants,
                                          args.nystrom_max, args.passes)
        if args.part == "stream":
            results["stream"] = stream_part(*args.stream, params, args.seed)
        if args.part in ("curve", "both"):
            table = curve_part(args.curve_T, args.curve_seeds, args.jobs, args.out, args.curve_method,
                               tuple(args.curve_systems), args.curve_reference, args.curve_support,
                               args.curve_validation_length, args.curve_filter_seeds, args.curve_first_run)
            results["curve"] = [dict(system=s, T=T, **v) for (s, T), v in table.items()]
    path = args.out / f"filter_scale_{args.part}.json"
    path.write_text(json.dumps(results, indent=1, default=float))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
