"""A long training log: the Nystrom filter never forms a T x T matrix."""

import time

import numpy as np

import kbfilter as kb

system = kb.systems.Oscillation()
states, obs = system.simulate(20_000, rng=0)
start = time.perf_counter()
kbf = kb.KernelBayesFilter(approximation="nystrom").fit(states, obs)
print(f"fit on T = 20,000 in {time.perf_counter() - start:.1f} s; ranks",
      kbf.rule_.kernel_x_.rank_, kbf.rule_.kernel_z_.rank_)
test_states, test_obs = system.simulate(100, rng=1)
means = kbf.batch_filter(test_obs)[0]
print("MSE:", np.mean(np.sum((means - test_states) ** 2, axis=1)))
