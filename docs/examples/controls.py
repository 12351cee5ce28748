"""A filter that uses a known control input, against the exact Kalman filter.

On a linear-Gaussian system driven by random controls the Kalman filter with the control matrix
is exact. The kernel Bayes filter learns the transition given the control from one logged run
(``fit(..., controls=)``, then ``predict(u)``); without the controls it has to treat them as noise.
"""

import numpy as np

import kbfilter as kb

system = kb.systems.ControlledLinearGaussian(F=[[0.8]], B=[[1.0]], H=[[1.0]], Q=[[0.05]], R=[[0.2]])
states, controls, obs = system.simulate(1500, rng=0)   # controls[t] moved the state to states[t]
test_states, test_controls, test_obs = system.simulate(300, rng=1)

# the extended Kalman filter on a linear system is the Kalman filter (filterpy's, with B)
kalman = kb.filters.ExtendedKalman(system).initialize(np.zeros(1), system.stationary_cov)
exact = kalman.batch_filter(test_obs, us=test_controls)[0]
print(f"Kalman filter (knows the model):  MSE {np.mean((exact - test_states) ** 2):.3f}")

params = dict(scale=0.5, reg_prior=1e-3, reg_update=1e-2)
with_u = kb.KernelBayesFilter(**params).fit(states, obs, controls=controls)
means = with_u.batch_filter(test_obs, us=test_controls)[0]
print(f"kernel Bayes filter with u:       MSE {np.mean((means - test_states) ** 2):.3f}")
blind = kb.KernelBayesFilter(**params).fit(states, obs)
means = blind.batch_filter(test_obs)[0]
print(f"kernel Bayes filter without u:    MSE {np.mean((means - test_states) ** 2):.3f}")
