"""One bad fix on a track: the learned-motion filter restarting at once against waiting for a second.

Each run simulates constant-velocity tracks (``ConstantVelocity(step=1, accel=0.5)``, 3 m position
fixes): ten to learn the motion from and one of 200 steps to filter. The test track's fixes get
glitches, one fix each ``--offset`` metres off (in a random direction) at steps 50 and 120, or, in
the jump case, every fix from step 50 on moved by the offset (the target really is elsewhere, as
when a track is handed over with a bias). A ``LearnedMotionFilter`` with the tracking model as its
sensor filters the fixes with ``reacquire_after`` 1 (restart at the first fix outside every
particle's gate, the default) and 2 (the first taken as an outlier). We report the position RMSE of
the ten steps from each glitch (or from the jump), over the whole track, and of the same filter on
the clean fixes, with the restarts and outliers each counted.

Usage:  python scenarios/fix_glitches.py [--runs 10] [--offset 500] [--particles 300] [--jobs 1]
"""

import warnings

import numpy as np
from joblib import Parallel, delayed
from scipy.stats import wilcoxon
from tqdm import tqdm

from kbfilter.cli import integer_at_least, study_parser, workers, write_study
from kbfilter.filters import LearnedMotionFilter
from kbfilter.systems import ConstantVelocity, PositionFixes

GLITCHES = (50, 120)
AFTER = 10  # steps scored from each glitch on
SETTINGS = (1, 2)


def _position_errors(means, truth):
    return np.linalg.norm(means[:, :2] - truth, axis=1)


def one_run(seed, offset, n_particles, test_length=200):
    model = ConstantVelocity(step=1.0, accel=0.5, sensor=PositionFixes(3.0), speed=10.0)
    rng = np.random.default_rng(seed)
    train = [model.simulate(300, rng=rng, burn_in=0)[0] for _ in range(10)]
    states, fixes = model.simulate(test_length, rng=rng, burn_in=0)
    truth = states[:, :2]
    angle = rng.uniform(0.0, 2.0 * np.pi, size=len(GLITCHES) + 1)
    shifts = offset * np.column_stack([np.cos(angle), np.sin(angle)])
    glitched = fixes.copy()
    glitched[list(GLITCHES)] += shifts[:-1]
    jumped, jumped_truth = fixes.copy(), truth.copy()
    jumped[GLITCHES[0]:] += shifts[-1]
    jumped_truth[GLITCHES[0]:] += shifts[-1]
    cases = {"clean": (fixes, truth, GLITCHES), "glitch": (glitched, truth, GLITCHES),
             "jump": (jumped, jumped_truth, GLITCHES[:1])}
    row = {"seed": seed}
    for k in SETTINGS:
        filt = LearnedMotionFilter(model, n_particles=n_particles, reacquire_after=k, random_state=seed)
        filt.fit(train, [x[:, :2] for x in train])
        for case, (zs, target, starts) in cases.items():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the restarts and outliers are counted below
                errors = _position_errors(filt.reset().batch_filter(zs)[0], target)
            window = np.concatenate([errors[t:t + AFTER] for t in starts])
            row[f"{case}_{k}"] = {"after": float(np.sqrt(np.mean(window ** 2))),
                                  "track": float(np.sqrt(np.mean(errors ** 2))),
                                  "reacquired": int(filt.diagnostics.get("reacquired", 0)),
                                  "outliers": int(filt.diagnostics.get("outlier", 0))}
    return row


def main(argv=None):
    parser = study_parser(__doc__)
    parser.add_argument("--runs", type=integer_at_least(1), default=10)
    parser.add_argument("--offset", type=float, default=500.0, help="metres a glitch or the jump moves the fixes")
    parser.add_argument("--particles", type=integer_at_least(2), default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=workers, default=1)
    parser.add_argument("--out", default="results/fix_glitches")
    args = parser.parse_args(argv)
    if not (np.isfinite(args.offset) and args.offset > 0):
        parser.error(f"argument --offset: expected a positive number of metres, got {args.offset}")
    seeds = [int(s.generate_state(1)[0]) for s in np.random.SeedSequence(args.seed).spawn(args.runs)]
    rows = Parallel(n_jobs=args.jobs)(delayed(one_run)(s, args.offset, args.particles)
                                      for s in tqdm(seeds, desc="runs"))
    lines = [f"constant velocity, 3 m fixes, {args.runs} runs, offset {args.offset:g} m, "
             f"{args.particles} particles", "",
             f"| fixes | reacquire_after | RMSE, {AFTER} steps from each glitch (m) | RMSE, track (m) | "
             f"restarts | outliers |", "|---|---|---|---|---|---|"]
    for case in ("clean", "glitch", "jump"):
        for k in SETTINGS:
            cells = [r[f"{case}_{k}"] for r in rows]
            lines.append(f"| {case} | {k} | {np.mean([c['after'] for c in cells]):.1f} | "
                         f"{np.mean([c['track'] for c in cells]):.1f} | "
                         f"{np.mean([c['reacquired'] for c in cells]):.1f} | "
                         f"{np.mean([c['outliers'] for c in cells]):.1f} |")
    once, twice = (np.array([r[f"glitch_{k}"]["after"] for r in rows]) for k in SETTINGS)
    p = f"{wilcoxon(once, twice).pvalue:.3g}" if args.runs > 1 else "n/a with one run"
    lines += ["", f"after a glitch, waiting for a second fix is better in {int(np.sum(twice < once))}/{args.runs} "
              f"runs (Wilcoxon p = {p})"]
    write_study(args.out, rows, lines)


if __name__ == "__main__":
    main()
