"""Figures. Each ``plot_*`` draws on ``ax`` (a new figure when None) and returns it; pyplot is
imported only when a figure is made, and nothing is ever shown."""

import numpy as np

__all__ = ["plot_mse_box", "plot_trajectory", "plot_frames", "save_figure"]


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


def plot_trajectory(states, estimates, observations=None, coord=0, steps=100, ax=None):
    """One state coordinate against time over the first ``steps`` test steps, with each
    method's estimate (and the observation when it shares the state's coordinates)."""
    ax = _axes(ax, figsize=(9, 3.2))
    states = np.asarray(states)[:steps]
    t = np.arange(len(states))
    if observations is not None:
        obs = np.asarray(observations)[:steps]
        if obs.ndim == 2 and obs.shape[1] == states.shape[1]:
            ax.scatter(t, obs[:, coord], s=8, color="0.6", label="observation", zorder=1)
    ax.plot(t, states[:, coord], color="k", lw=2, label="true state", zorder=2)
    for name, est in estimates.items():
        ax.plot(t, np.asarray(est)[:steps, coord], lw=1, alpha=0.85, label=name, zorder=3)
    ax.set_xlabel("test step")
    ax.set_ylabel(f"x[{coord}]")
    ax.legend(fontsize=7, ncol=4, loc="upper right")
    return ax


_ESTIMATE_COLOURS = ("C1", "C3", "C4", "C0", "C5", "C6")


def plot_frames(frames, titles, marks=None, axes=None):
    """A row of observation images (grayscale or RGB, clipped to [0, 1]) with a title each.

    ``marks`` (optional) gives per frame a dict ``{label: (column, row)}`` in pixel coordinates
    (e.g. a system's ``pixel_coordinates``): a point is drawn for each, or a vertical line when
    the row is NaN (a direction, as in a camera view). The first label is drawn as the truth.
    """
    if axes is None:
        import matplotlib.pyplot as plt

        _, axes = plt.subplots(1, len(frames), figsize=(2.6 * len(frames), 3.6))
    axes = np.atleast_1d(axes)
    marks = [{}] * len(frames) if marks is None else marks
    for ax, frame, title, frame_marks in zip(axes, frames, titles, marks):
        frame = np.clip(np.asarray(frame), 0, 1)
        ax.imshow(frame, cmap="gray" if frame.ndim == 2 else None, vmin=0, vmax=1)
        for k, (label, (col, row)) in enumerate(frame_marks.items()):
            # estimates skip matplotlib's green (C2), which would read as the truth's lime
            colour = _ESTIMATE_COLOURS[(k - 1) % len(_ESTIMATE_COLOURS)]
            style = dict(color="lime", lw=2) if k == 0 else dict(color=colour, lw=1.2, ls="--")
            if np.isnan(row):
                ax.axvline(col, label=label, **style)
            else:
                ax.plot(col, row, marker="+" if k == 0 else "x", ms=9, mew=style["lw"], color=style["color"],
                        ls="none", label=label)
        ax.set_xlim(-0.5, frame.shape[1] - 0.5)
        ax.set_ylim(frame.shape[0] - 0.5, -0.5)
        ax.set_title(title, fontsize=7)
        ax.set_xticks([])
        ax.set_yticks([])
    if marks and marks[0]:
        axes[0].legend(fontsize=6, loc="lower left", framealpha=0.6)
    return axes[0]


def save_figure(ax, path):
    fig = ax.figure
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    import matplotlib.pyplot as plt

    plt.close(fig)
