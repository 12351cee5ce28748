"""What a Kernel Monte Carlo filter step costs on the robot room, and what dominates it.

1,000 training poses and 1,000 particles by default (blurred 16 x 64 images, the tuned point of
the localization study: scale 0.2, scale_z 0.5, both regularisers 1e-2). Times a whole step
(``predict(u)`` then ``update(z)``) with herding and with the embedding-ratio resampling on the
exact kernels, and with the ratio on Nystrom kernels (``approximation="nystrom"``, the path for
long logs: no training-by-training array), then
the parts of an update, recomputed through the public pieces the filter uses: the particles'
kernel values at the training states, the prior's projection, the observation's kernel
vector, the weights (IW-KBR), the resampling (herding among training states and particles, or
the ratio), and the prediction's motion draws.

Usage:  python benchmarks/kmc_step.py [--train 1000] [--particles 1000] [--steps 100]
        (--train 5000: the exact filter's fit and steps then take minutes)
"""

import argparse
import time

import numpy as np

import kbfilter as kb
from kbfilter.filters.kmc import herd_with_particles

PARAMS = {"scale": 0.2, "scale_z": 0.5, "reg_prior": 1e-2, "reg_update": 1e-2}


def timed(fn, repeat):
    start = time.perf_counter()
    for _ in range(repeat):
        out = fn()
    return 1000 * (time.perf_counter() - start) / repeat, out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", type=int, default=1000)
    parser.add_argument("--particles", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=100)
    args = parser.parse_args(argv)
    robot = kb.systems.RobotInRoom()
    poses, _, images = robot.simulate(args.train, rng=0)
    _, test_controls, test_images = robot.simulate(args.steps, rng=1)
    print(f"training poses {args.train}, particles {args.particles}, {args.steps} steps, "
          f"BLAS threads {kb.blas_threads()}")
    whole, filters = {}, {}
    for resample, approximation in (("herding", "exact"), ("ratio", "exact"), ("ratio", "nystrom")):
        start = time.perf_counter()
        kmc = kb.KernelMonteCarloFilter(robot, n_particles=args.particles, resample=resample,
                                        approximation=approximation, random_state=0, **PARAMS).fit(poses, images)
        fit_s = time.perf_counter() - start
        start = time.perf_counter()
        for u, z in zip(test_controls, test_images):
            kmc.predict(u)
            kmc.update(z)
        key = f"resample={resample!r}, approximation={approximation!r}"
        whole[key], filters[key] = 1000 * (time.perf_counter() - start) / args.steps, kmc
        ranks = ""
        if approximation != "exact":
            ranks = f" (landmarks: {kmc.rule_.kernel_x_.rank_} states, {kmc.rule_.kernel_z_.rank_} images)"
        print(f"  a step, {key}: {whole[key]:.1f} ms; fit {fit_s:.1f} s{ranks}")
    herding, ratio, nystrom = whole.values()
    print(f"  herding / ratio: {herding / ratio:.2f}; ratio, nystrom / exact: {nystrom / ratio:.2f}")

    # the parts, on the particles the filter holds now
    kmc = filters["resample='ratio', approximation='exact'"]
    rule, X, U = kmc.rule_, kmc.states_, kmc.particles
    z = kmc.observation_model_.admit(test_images[-1])  # mapped by the filter's features
    repeat = 10
    parts = {}
    parts["prior kernel k(X, U)"], cross = timed(lambda: rule.kernel_x_(X, U), repeat)
    parts["projection of the prior"], mu = timed(lambda: rule.projection(cross.mean(axis=1), check_input=False), repeat)
    parts["observation kernel k_z(Z, z)"], obs = timed(lambda: rule.observation_vectors(z), repeat)
    parts["IW-KBR weights"], (W, _) = timed(lambda: rule.weights_from_projection(mu, obs, check_input=False), repeat)
    p = np.maximum(W[:, 0], 0) / np.maximum(W[:, 0], 0).sum()
    state_gram = rule.kernel_x_(X)  # built once at fit

    def herding():
        return herd_with_particles(state_gram, cross, rule.kernel_x_(U), p, args.particles)

    parts["herding (particle kernel, picks)"], _ = timed(herding, 3)
    parts["ratio (particle kernel)"], _ = timed(lambda: rule.kernel_x_(U).mean(axis=1), repeat)
    parts["motion draws (predict)"], _ = timed(lambda: kmc.predict(test_controls[0]), repeat)
    for name, ms in parts.items():
        print(f"  {name:<34} {ms:8.2f} ms")


if __name__ == "__main__":
    main()
