"""Bring your own recorded data: a CSV log with the state and the observation in each row.

Here the log is written first from a simulation, so that the example runs anywhere; replace the
file with your own (columns ``x0, x1, z0, z1``; several recordings may be given as a list).
"""

import os
import tempfile

import numpy as np

import kbfilter as kb

# -- a recorded log: one row per time step ---------------------------------------------------------
log = os.path.join(tempfile.mkdtemp(), "log.csv")
states, obs = kb.systems.Rotation().simulate(700, rng=3)
np.savetxt(log, np.hstack([states, obs]), delimiter=",", header="x0,x1,z0,z1", comments="")

# -- learn a filter from it, tune it on its last 150 steps, run it on new observations ------------
data = np.loadtxt(log, delimiter=",", skiprows=1)
train_states, train_obs = data[:600, :2], data[:600, 2:]
kbf = kb.tune_filter(kb.KernelBayesFilter(), train_states, train_obs, validation_length=150, progress=False,
                     param_grid={"scale": (0.1, 0.25, 0.5, 1.0), "reg_prior": (1e-3,), "reg_update": (1e-3, 1e-2, 1e-1, 1.0)})
print("chosen:", kbf.best_params_)
new_states, new_obs = data[600:, :2], data[600:, 2:]
for z in new_obs[:3]:
    kbf.predict()
    kbf.update(z)
    print("estimate", np.round(kbf.x, 3))
means = kbf.reset().batch_filter(new_obs)[0]
print("MSE on the last 100 rows:", np.mean(np.sum((means - new_states) ** 2, axis=1)))
kbf.save(os.path.join(os.path.dirname(log), "filter.npz"))   # reload with KernelBayesFilter.load
