"""Track the noisy oscillation with a filter learned from one simulated trajectory."""

import numpy as np

import kbfilter as kb

system = kb.systems.Oscillation()
states, obs = system.simulate(600, rng=0)
kbf = kb.KernelBayesFilter(scale=0.5, reg_prior=1e-3, reg_update=1e-2).fit(states, obs)

test_states, test_obs = system.simulate(100, rng=1)
means, covs, _, _ = kbf.batch_filter(test_obs)
print("kernel Bayes filter MSE:", np.mean(np.sum((means - test_states) ** 2, axis=1)))
pf = kb.filters.ParticleFilter(system, n_particles=500, rng=0).batch_filter(test_obs)[0]
print("particle filter (true model) MSE:", np.mean(np.sum((pf - test_states) ** 2, axis=1)))
