"""After filtering: the smoothed run, a forecast, an honest covariance and the likelihood.

A rotation seen through noise: tune a kernel Bayes filter (which also calibrates its covariance),
filter a test run, smooth it, forecast past its end, check the covariance with the NEES, and score
held-out observations with the learned likelihood. The unscented Kalman filter given the true model
and its RTS smoother are the yardstick. Set KBFILTER_FIGURE_DIR to keep the figure.
"""

import os
import tempfile

import numpy as np

import kbfilter as kb

system = kb.systems.Rotation()
states, obs = system.simulate(1000, rng=0)
truth, zs = system.simulate(200, rng=1)


def mse(means):
    return np.mean(np.sum((means - truth[: len(means)]) ** 2, axis=1))


if __name__ == "__main__":
    grid = {"scale": (0.25, 0.5, 1.0), "reg_prior": (1e-3,), "reg_update": (1e-2, 1e-1)}
    kbf = kb.tune_filter(kb.KernelBayesFilter(), states, obs, param_grid=grid, progress=False)
    print("chosen:", kbf.best_params_, "covariance_scale:", round(kbf.covariance_scale, 3))   # set on validation

    means, covs, _, _ = kbf.batch_filter(zs)
    smoothed, smoothed_covs = kbf.reset().smooth(zs)
    rts, _ = kb.filters.UnscentedKalman(system).smooth(zs)
    ukf = kb.filters.UnscentedKalman(system).batch_filter(zs)[0]
    print(f"kernel Bayes filter: MSE {mse(means):.4f} filtered, {mse(smoothed):.4f} smoothed")
    print(f"UKF (true model):    MSE {mse(ukf):.4f} filtered, {mse(rts):.4f} RTS-smoothed")

    low, high = kb.stats.chi2_band(dim=2, n_steps=len(zs))
    print(f"mean NEES {np.mean(kb.stats.nees(truth, means, covs)):.2f} filtered, "
          f"{np.mean(kb.stats.nees(truth, smoothed, smoothed_covs)):.2f} smoothed "
          f"(a consistent filter: 2, 95 % band {low:.2f}-{high:.2f})")

    kbf.reset().batch_filter(zs[:150])          # forecast 10 steps past step 150, belief unchanged
    ahead, ahead_covs = kbf.forecast(10)
    print(f"forecast MSE 1 step ahead {np.sum((ahead[0] - truth[150]) ** 2):.4f}, 10 steps ahead "
          f"{np.sum((ahead[9] - truth[159]) ** 2):.4f} (reported variance {np.trace(ahead_covs[9]):.3f})")

    kbf.reset()
    total = 0.0
    for z in zs:                                # the log-likelihood of the held-out run
        kbf.predict()
        kbf.update(z)
        total += kbf.log_likelihood
    print(f"held-out log-likelihood {total:.1f} nats ({total / len(zs):.3f} a step)")

    import matplotlib.pyplot as plt

    steps = np.arange(60)
    fig, axes = plt.subplots(2, 1, figsize=(8, 4.5), sharex=True)
    for j, ax in enumerate(axes):
        ax.plot(steps, truth[steps, j], color="0.6", lw=2.5, label="truth")
        ax.plot(steps, zs[steps, j], ".", color="0.3", ms=4, label="observation")
        ax.plot(steps, means[steps, j], color="tab:blue", label=f"filtered (MSE {mse(means):.4f})")
        ax.plot(steps, smoothed[steps, j], color="tab:orange", label=f"smoothed (MSE {mse(smoothed):.4f})")
        ax.set_ylabel(f"x[{j}]")
    axes[0].legend(fontsize=7, ncol=4, loc="upper center", bbox_to_anchor=(0.5, 1.3))
    axes[1].set_xlabel("test step (MSEs over all 200)")
    folder = os.environ.get("KBFILTER_FIGURE_DIR") or tempfile.mkdtemp()
    kb.plots.save_figure(axes[0], os.path.join(folder, "smoothing.png"))
