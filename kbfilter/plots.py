"""Figures. Each ``plot_*`` draws on ``ax`` (a new figure when None) and returns it; pyplot is
imported only when a figure is made, and nothing is ever shown."""

import numpy as np

__all__ = ["plot_mse_box", "plot_trajectory", "save_figure"]


def _axes(ax, figsize=(7, 4.5)):
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    return plt.figure(figsize=figsize).add_subplot()


def plot_mse_box(mse_by_method, ax=None):
    """Box plot of per-run MSE, one box per method (log scale)."""
    ax = _axes(ax)
    names = list(mse_by_method)
    ax.boxplot([np.asarray(mse_by_method[n]) for n in names], showmeans=True)
    ax.set_xticks(range(1, len(names) + 1), names, rotation=20)
    ax.set_yscale("log")
    ax.set_ylabel("test MSE")
    ax.grid(True, axis="y", which="both", alpha=0.3)
    return ax


def plot_trajectory(states, estimates, observations=None, ax=None):
    """The first two state coordinates of a test run, with each method's estimates."""
    ax = _axes(ax, figsize=(6.5, 6.5))
    states = np.asarray(states)
    if observations is not None:
        obs = np.asarray(observations)
        if obs.ndim == 2 and obs.shape[1] == states.shape[1]:
            ax.scatter(obs[:, 0], obs[:, 1], s=6, color="0.7", label="observations")
    ax.plot(states[:, 0], states[:, 1], color="k", lw=2, label="true state")
    for name, est in estimates.items():
        est = np.asarray(est)
        ax.plot(est[:, 0], est[:, 1], lw=1, alpha=0.8, label=name)
    ax.set_aspect("equal", adjustable="datalim")
    ax.legend(fontsize=8)
    return ax


def save_figure(ax, path):
    fig = ax.figure
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    import matplotlib.pyplot as plt

    plt.close(fig)
