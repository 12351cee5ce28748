"""What the prior's neighbours buy the bounded-support filter: error and time a step against the support.

For each seed, one training log and one test run; one ``approximation="local"`` fit, and every
``SUPPORT:NEIGHBOURS`` configuration from it (``with_params``: same kernels and transition), at
fixed hyperparameters. Prints, per configuration, the mean test MSE over the seeds (± its standard
error), the median time a step, and both as ratios against the first configuration, with the
per-seed MSE ratios. A first configuration whose support holds every training state (``1000:0`` at
``--T 1000``) is the exact filter with the kNN transition, the baseline the rest approximate.

The defaults are the moving sprite on blurred frames at 10,000 training frames, with the
hyperparameters tuning chose there for 256 draws (scale 0.35, scale_z 0.5, reg_prior 1e-2,
reg_update 1e-4):

    python benchmarks/local_prior.py                                   # sprite, 4 seeds
    python benchmarks/local_prior.py --system oscillation --T 100000 --params 0.25 1e-4 0.1 \\
        --configs 256:0 256:3 1024:0

On vector systems ``--params`` is scale, reg_prior and reg_update; on the sprite, scale, scale_z,
reg_prior and reg_update. BLAS runs with the library's defaults.
"""

import argparse
import time
import warnings

import numpy as np

import kbfilter as kb
from kbfilter.features import GaussianBlur

SYSTEMS = {"sprite": kb.systems.MovingSprite, "oscillation": kb.systems.Oscillation, "rotation": kb.systems.Rotation}


def configuration(text):
    support, _, neighbours = text.partition(":")
    try:
        return int(support), int(neighbours or 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected SUPPORT:NEIGHBOURS (integers), got {text!r}") from None


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--system", choices=tuple(SYSTEMS), default="sprite")
    parser.add_argument("--T", type=int, default=10000, help="training steps")
    parser.add_argument("--steps", type=int, default=200, help="test steps")
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--params", type=float, nargs="+", default=None,
                        help="the hyperparameters (see above); default: the sprite's tuned point, or the "
                             "filter's defaults on vectors")
    parser.add_argument("--configs", type=configuration, nargs="+",
                        default=[(256, 0), (1024, 0), (128, 3), (256, 3)], metavar="SUPPORT:NEIGHBOURS",
                        help="the first is the baseline of the ratios")
    args = parser.parse_args(argv)
    args.configs = list(dict.fromkeys(args.configs))  # a configuration given twice is run once
    images = args.system == "sprite"
    names = ("scale", "scale_z", "reg_prior", "reg_update") if images else ("scale", "reg_prior", "reg_update")
    values = args.params or ((0.35, 0.5, 1e-2, 1e-4) if images else (1.0, 1e-2, 1e-2))
    if len(values) != len(names):
        parser.error(f"--params: expected {len(names)} values ({', '.join(names)}), got {len(values)}")
    params = dict(zip(names, values))
    extra = dict(features=GaussianBlur(sigma=3.0, stride=2)) if images else {}
    system = SYSTEMS[args.system]()
    print(f"{args.system}, T = {args.T}, {args.steps} test steps, {args.seeds} seeds, {params}")
    mse = {c: [] for c in args.configs}
    ms = {c: [] for c in args.configs}
    for seed in range(args.seeds):
        rng = np.random.default_rng([seed, args.T])
        (X, Z), (Xt, Zt) = system.simulate(args.T, rng), system.simulate(args.steps, rng)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", kb.NumericalWarning)
            fitted = kb.KernelBayesFilter(approximation="local", **params, **extra).fit(X, Z)
            for support, neighbours in args.configs:
                filt = fitted.with_params(support=support, prior_neighbors=neighbours)
                start = time.perf_counter()
                means = filt.batch_filter(Zt)[0]
                ms[support, neighbours].append(1000 * (time.perf_counter() - start) / args.steps)
                mse[support, neighbours].append(float(np.mean(np.sum((means - Xt) ** 2, axis=1))))
        print(f"  seed {seed}: " + "  ".join(f"{s}:{p} {mse[s, p][-1]:.5f}" for s, p in args.configs), flush=True)
    base = args.configs[0]
    print(f"\n{'support:neighbours':>18} {'MSE':>18} {'ms a step':>10} {'MSE ratio':>10} {'time ratio':>10}  "
          f"per-seed MSE ratios")
    for config in args.configs:
        errors = np.array(mse[config])
        ratios = errors / np.array(mse[base])
        se = errors.std(ddof=1) / np.sqrt(errors.size) if errors.size > 1 else 0.0
        step = float(np.median(ms[config]))
        print(f"{config[0]:>12}:{config[1]:<5} {errors.mean():>10.5f} ± {se:.5f} {step:>10.2f} "
              f"{errors.mean() / np.mean(mse[base]):>10.3f} {step / np.median(ms[base]):>10.2f}  "
              + " ".join(f"{r:.3f}" for r in ratios))


if __name__ == "__main__":
    main()
