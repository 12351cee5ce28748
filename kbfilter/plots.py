"""Figures. Each ``plot_*`` draws on ``ax`` (a new figure when None) and returns it; pyplot is
imported only when a figure is made, and nothing is ever shown."""

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from ._validation import check_int, check_matrix

__all__ = ["plot_mse_box", "plot_trajectory", "plot_frames", "plot_map", "plot_tracks", "save_figure"]


def _checked_methods(estimates, name, n_rows, dim):
    """``{method: (n_rows, >= dim) float array}``: each method's estimates, one row a step of the
    truth (a method's NaN rows are drawn as gaps, not refused)."""
    if not isinstance(estimates, Mapping):
        raise ValueError(f"{name}: expected a dict of method names and estimates, got {type(estimates).__name__}")
    checked = {}
    for method, values in estimates.items():
        checked[method] = _checked_rows(values, f"{name}[{method!r}]", n_rows, dim)
    return checked


def _checked_rows(values, name, n_rows, dim):
    """``values`` as an ``(n_rows, >= dim)`` float array, NaN rows allowed (drawn as gaps)."""
    values = check_matrix(values, name, finite=False)
    if values.shape[0] != n_rows or values.shape[1] < dim:
        raise ValueError(f"{name}: expected {n_rows} rows (one a true state) of at least {dim} columns, "
                         f"got shape {values.shape}")
    return values


def _checked_mask(values, name, n):
    """``values`` as a boolean array of length ``n``."""
    mask = np.asarray(values)
    if mask.shape != (n,) or mask.dtype.kind not in "biu" or not np.isin(mask, (0, 1)).all():
        raise ValueError(f"{name}: expected {n} booleans (one a true state), got shape {mask.shape} of {mask.dtype}")
    return mask.astype(bool)


def _checked_per_item(values, name, n, item="track", required=False):
    """``values`` as a list of ``n`` entries, one an ``item``, or None (refused when ``required``)."""
    if values is None and not required:
        return None
    if isinstance(values, (str, bytes, Mapping)) or not hasattr(values, "__len__"):
        raise ValueError(f"{name}: expected a list with one entry a {item} ({n}), got {type(values).__name__}")
    if len(values) != n:
        raise ValueError(f"{name}: expected one entry a {item} ({n}), got {len(values)}")
    return list(values)


def _checked_axes(axes, n, what):
    """The caller's ``axes`` as a flat list, at least ``n`` of them (``what`` says what each is for)."""
    axes = list(np.ravel(np.asarray(axes, dtype=object)))
    if len(axes) < n or not all(callable(getattr(ax, "plot", None)) for ax in axes):
        raise ValueError(f"axes: expected {n} matplotlib axes ({what}), got {len(axes)} "
                         f"{type(axes[0]).__name__ if axes else 'entries'}")
    return axes


def _axes(ax, figsize=(7, 4.5)):
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    return plt.figure(figsize=figsize).add_subplot()


def plot_mse_box(mse_by_method, ax=None):
    """Box plot of per-run MSE, one box per method (log scale): the quartiles, the median (a line)
    and the mean (a triangle), as the legend says.

    Parameters
    ----------
    mse_by_method : dict of str to sequence of float
        Each method's MSE in every run (a number for one run; NaN for a run that failed). A run
        whose MSE is NaN or infinite is left out of its box and counted under the method's name.
    ax : matplotlib.axes.Axes, optional
        Where to draw; a new figure when None.

    Returns
    -------
    matplotlib.axes.Axes
        The axes drawn on.
    """
    if not isinstance(mse_by_method, Mapping) or not mse_by_method:
        raise ValueError(f"mse_by_method: expected a dict of method names and per-run MSEs, got {mse_by_method!r:.80}")
    # a number is one run's MSE
    runs = {name: check_matrix(np.atleast_1d(values), f"mse_by_method[{name!r}]", finite=False).ravel()
            for name, values in mse_by_method.items()}
    for name, values in runs.items():
        if np.any(values < 0):
            raise ValueError(f"mse_by_method[{name!r}]: expected mean squared errors (>= 0), got {values.min():g}")
    ax = _axes(ax)
    names = list(runs)
    # a failed run (NaN) or a diverged one (inf) has no place on the axis: counted in the label instead
    kept = [runs[n][np.isfinite(runs[n])] for n in names]
    boxes = ax.boxplot(kept, showmeans=True)
    ax.legend([boxes["medians"][0], boxes["means"][0]], ["median", "mean"], fontsize=7, framealpha=0.6)
    labels = [n if len(k) == len(runs[n]) else f"{n}\n({len(runs[n]) - len(k)} of {len(runs[n])} not finite)"
              for n, k in zip(names, kept)]
    ax.set_xticks(range(1, len(names) + 1), labels, rotation=20)
    ax.set_yscale("log")
    ax.set_ylabel("test MSE")
    ax.grid(True, axis="y", which="both", alpha=0.3)
    return ax


def plot_trajectory(states, estimates, steps=100, axes=None):
    """Each method's estimate against the truth, one panel per method, and their errors.

    One panel per method draws the true path (grey) and the method's estimate over the first
    ``steps`` test steps: in the phase plane of the first two coordinates, or against time for a
    one-dimensional state; its title gives the method's MSE over those steps and every state
    coordinate (the squared Euclidean error of the whole state, whatever the panel draws). A last panel draws
    each method's running mean squared error against time, so that methods whose paths look
    alike are still told apart.

    Parameters
    ----------
    states : array-like of shape (T, dim_x)
        The true states.
    estimates : dict of str to array-like of shape (T, dim_x)
        Each method's estimates.
    steps : int
        How many steps to draw.
    axes : sequence of Axes, optional
        ``len(estimates) + 1`` axes to draw on (a new figure when None).

    Returns
    -------
    Axes
        The first panel (``ax.figure`` is the whole figure).
    """
    states = check_matrix(states, "states")
    shown = {name: est[:check_int(steps, "steps")]
             for name, est in _checked_methods(estimates, "estimates", len(states), states.shape[1]).items()}
    if not shown:
        raise ValueError("estimates: expected at least one method's estimates")
    states = states[:steps]
    names = list(shown)
    if axes is not None:
        axes = _checked_axes(axes, len(names) + 1, "one a method, then one for the errors")
    else:
        import matplotlib.pyplot as plt

        cols = min(3, len(names) + 1)
        rows = -(-(len(names) + 1) // cols)
        fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 3.2 * rows), squeeze=False)
        for ax in axes.ravel()[len(names) + 1:]:
            ax.set_visible(False)
        axes = list(axes.ravel())
    t = np.arange(len(states))
    phase = states.shape[1] >= 2
    with np.errstate(over="ignore"):  # an estimate beyond 1e154 has an infinite squared error, shown as inf
        errors = {name: np.sum((est - states) ** 2, axis=1) for name, est in shown.items()}
    for k, (name, ax) in enumerate(zip(names, axes)):
        est = shown[name]
        ax.plot(*((states[:, 0], states[:, 1]) if phase else (t, states[:, 0])), color="0.6", lw=2,
                label="true state")
        ax.plot(*((est[:, 0], est[:, 1]) if phase else (t, est[:, 0])), color=f"C{k}", lw=1, label=name)
        ax.set_title(f"{name}: MSE {np.mean(errors[name]):.3g} ({len(states)} steps, "
                     f"{'all ' + str(states.shape[1]) + ' coordinates' if states.shape[1] > 1 else 'x[0]'})",
                     fontsize=9)
        ax.set_xlabel("x[0]" if phase else "test step", fontsize=8)
        ax.set_ylabel("x[1]" if phase else "x[0]", fontsize=8)
        ax.tick_params(labelsize=7)
    # the first panel says which line is the truth (its paths cross the estimate's too often to tell)
    axes[0].legend(fontsize=6, loc="upper right", framealpha=0.6)
    ax = axes[len(names)]
    running = {name: np.cumsum(errors[name]) / (t + 1) for name in names}
    for k, name in enumerate(names):
        ax.plot(t, running[name], color=f"C{k}", label=name)
    # (errors zero or infinite have nothing to draw on a log scale)
    if any(np.any((r > 0) & np.isfinite(r)) for r in running.values()):
        ax.set_yscale("log")
    ax.set_title("running mean squared error", fontsize=9)
    ax.set_xlabel("test step", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.legend(fontsize=6)
    return axes[0]


_ESTIMATE_COLOURS = ("C1", "C3", "C4", "C0", "C5", "C6")


def plot_frames(frames, titles, marks=None, axes=None):
    """A row of observation images (grayscale or RGB, clipped to [0, 1]) with a title each.

    ``marks`` (optional) gives per frame a dict ``{label: (column, row)}`` in pixel coordinates
    (e.g. a system's ``pixel_coordinates``): a point is drawn for each, or a vertical line when
    the row is NaN (a direction, as in a camera view). The first label is drawn as the truth.

    Parameters
    ----------
    frames : sequence of ndarray
        The images, ``(rows, columns)`` or ``(rows, columns, 3)``.
    titles : sequence of str
        One per frame.
    marks : sequence of dict, optional
        Per frame, ``{label: (column, row)}``.
    axes : sequence of matplotlib.axes.Axes, optional
        One per frame; a new figure when None.

    Returns
    -------
    matplotlib.axes.Axes
        The first frame's axes (its legend names the marks).
    """
    if isinstance(frames, (str, bytes, Mapping)) or not hasattr(frames, "__len__"):
        raise ValueError(f"frames: expected a list of images, got {type(frames).__name__}")
    frames = [np.asarray(frame) for frame in frames]
    for i, frame in enumerate(frames):
        if not (frame.ndim == 2 or (frame.ndim == 3 and frame.shape[2] == 3)) or frame.dtype.kind not in "biuf":
            raise ValueError(f"frames[{i}]: expected a numeric image of shape (rows, columns) or (rows, columns, 3), "
                             f"got shape {frame.shape} of {frame.dtype}")
    if not frames:
        raise ValueError("frames: expected at least one image")
    titles = _checked_per_item(titles, "titles", len(frames), "frame", required=True)
    marks = [{}] * len(frames) if marks is None else _checked_per_item(marks, "marks", len(frames), "frame")
    for i, frame_marks in enumerate(marks):
        if not isinstance(frame_marks, Mapping):
            raise ValueError(f"marks[{i}]: expected a dict of labels and (column, row) points, got "
                             f"{type(frame_marks).__name__}")
    if axes is None:
        import matplotlib.pyplot as plt

        _, axes = plt.subplots(1, len(frames), figsize=(2.6 * len(frames), 3.6))
    axes = _checked_axes(axes, len(frames), "one a frame")
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


def _checked_clouds(particles, weights):
    """``[(method, step, cloud, cloud's weights or None)]`` from :func:`plot_map`'s arguments."""
    clouds = []
    for name, by_step in _checked_mapping(particles, "particles").items():
        given = _checked_mapping(_checked_mapping(weights, "weights").get(name), f"weights[{name!r}]")
        for step, cloud in _checked_mapping(by_step, f"particles[{name!r}]").items():
            where = f"[{name!r}][{step!r}]"
            cloud = check_matrix(cloud, "particles" + where)
            if cloud.shape[1] < 2:
                raise ValueError(f"particles{where}: expected particles of at least 2 coordinates (the position), "
                                 f"got shape {cloud.shape}")
            w = given.get(step)
            if w is not None:
                w = np.asarray(w, dtype=float) if np.asarray(w).dtype.kind in "biuf" else None
                if w is None or w.shape != (len(cloud),) or not np.all(np.isfinite(w) & (w >= 0)) or not w.sum() > 0:
                    raise ValueError(f"weights{where}: expected {len(cloud)} non-negative finite weights, one a "
                                     f"particle, not all zero")
            clouds.append((name, step, cloud, w))
    return clouds


def _checked_mapping(values, name):
    """``values`` as a dict (None: empty)."""
    if values is None:
        return {}
    if not isinstance(values, Mapping):
        raise ValueError(f"{name}: expected a dict, got {type(values).__name__}")
    return values


def plot_map(system, states, estimates, particles=None, ax=None, weights=None):
    """A system's map from above with the true path, each method's estimates and some particles.

    Parameters
    ----------
    system : System
        A system that draws its map (``top_down(ax)``, as :class:`~kbfilter.systems.RobotInRoom`).
    states : array-like of shape (T, dim_x)
        The true states; the first two coordinates are the position.
    estimates : dict of str to array-like of shape (T, dim_x)
        Each method's estimates.
    particles : dict of str to dict of int to array-like of shape (N, dim_x), optional
        For some methods, their particles after some steps (``{method: {step: particles}}``).
    ax : matplotlib.axes.Axes, optional
        Where to draw; a new figure when None.
    weights : dict of str to dict of int to array-like of shape (N,), optional
        The particles' weights, keyed as ``particles``: a particle's marker area is proportional
        to its weight (equal markers where none are given).

    Returns
    -------
    matplotlib.axes.Axes
        The axes drawn on.
    """
    if not callable(getattr(system, "top_down", None)):
        raise ValueError(f"system: expected a system that draws its map (top_down(ax)), got {type(system).__name__}")
    states = check_matrix(states, "states")
    estimates = _checked_methods(estimates, "estimates", len(states), 2)
    clouds = _checked_clouds(particles, weights)
    ax = _axes(ax, figsize=(6, 6))
    system.top_down(ax)
    ax.plot(states[:, 0], states[:, 1], color="black", lw=2, label="true path")
    for name, means in estimates.items():
        ax.plot(means[:, 0], means[:, 1], lw=1, alpha=0.8, label=name)
    for name, step, cloud, w in clouds:
        # equal weights keep the 2-point marker of an unweighted cloud, one heavy particle does
        # not hide the map (at most 30 times that), and the heaviest are drawn last, on top
        size = np.full(len(cloud), 2.0) if w is None else np.minimum(2.0 * len(cloud) * w / np.sum(w), 60.0)
        order = np.argsort(size)
        ax.scatter(cloud[order, 0], cloud[order, 1], s=size[order], alpha=0.3, label=f"{name} particles, step {step}")
    ax.legend(fontsize=6, loc="upper right", framealpha=0.6)
    return ax


def plot_tracks(truths, estimates, observations=None, missing=None, titles=None, axes=None):
    """Recorded tracks from above, one panel each, with the observations and each method's estimates.

    Positions are drawn in kilometres from each track's first true position, so that tracks far
    apart share one scale of detail.

    Parameters
    ----------
    truths : sequence of array-like of shape (T_i, >=2)
        The true tracks; the first two columns are east and north, metres.
    estimates : sequence of dict of str to array-like of shape (T_i, >=2)
        For each track, each method's estimates (the first two columns are drawn).
    observations : sequence of (array-like of shape (T_i, 2) or None), optional
        Position fixes to draw as dots (NaN rows, or None for a track, draw nothing).
    missing : sequence of array-like of bool, shape (T_i,), optional
        The steps whose observation was missing: the true positions there are marked.
    titles : sequence of str, optional
        One title a panel.
    axes : sequence of Axes, optional
        One per track; a new figure when None.

    Returns
    -------
    list of matplotlib.axes.Axes
        The axes drawn on.
    """
    if not isinstance(truths, (list, tuple)):
        raise ValueError(f"truths: expected a list of tracks, arrays of shape (T_i, >= 2), got {type(truths).__name__} "
                         f"(one track is [track])")
    n = len(truths)
    if n == 0:
        raise ValueError("truths: expected at least one track to draw")
    truths = [check_matrix(truth, f"truths[{i}]") for i, truth in enumerate(truths)]
    estimates = [_checked_methods(by_method, f"estimates[{i}]", len(truth), 2)
                 for i, (truth, by_method) in enumerate(zip(truths, _checked_per_item(estimates, "estimates", n,
                                                                                      required=True)))]
    observations = _checked_per_item(observations, "observations", n)
    if observations is not None:
        observations = [None if fixes is None else _checked_rows(fixes, f"observations[{i}]", len(truth), 2)
                        for i, (truth, fixes) in enumerate(zip(truths, observations))]
    missing = _checked_per_item(missing, "missing", n)
    if missing is not None:
        missing = [_checked_mask(gone, f"missing[{i}]", len(truth))
                   for i, (truth, gone) in enumerate(zip(truths, missing))]
    titles = _checked_per_item(titles, "titles", n)
    if axes is None:
        import matplotlib.pyplot as plt

        cols = min(n, 2)
        fig, grid = plt.subplots((n + cols - 1) // cols, cols, figsize=(5.5 * cols, 4.8 * ((n + cols - 1) // cols)),
                                 squeeze=False)
        axes = list(grid.ravel())
        for ax in axes[n:]:
            ax.set_visible(False)
    else:
        axes = _checked_axes(axes, n, "one a track")
    for i in range(n):
        ax = axes[i]
        truth = truths[i]
        origin = truth[0, :2]

        def km(points):
            return (np.asarray(points, float)[:, :2] - origin) / 1e3

        if observations is not None and observations[i] is not None:
            fixes = km(observations[i])
            ax.scatter(fixes[:, 0], fixes[:, 1], s=4, color="0.6", label="observations", zorder=1)
        path = km(truth)
        ax.plot(path[:, 0], path[:, 1], color="black", lw=2, label="true track", zorder=2)
        if missing is not None and np.any(missing[i]):
            gone = missing[i]
            ax.scatter(path[gone, 0], path[gone, 1], s=10, marker="x", color="tab:red",
                       label="observation missing", zorder=3)
        for name, means in estimates[i].items():
            means = km(means)
            ax.plot(means[:, 0], means[:, 1], lw=1, alpha=0.85, label=name, zorder=4)
        ax.set_aspect("equal", adjustable="datalim")
        ax.set_xlabel("east, km")
        ax.set_ylabel("north, km")
        if titles is not None:
            ax.set_title(titles[i], fontsize=9)
        ax.legend(fontsize=6, loc="best", framealpha=0.6)
    return list(axes[:n])


def save_figure(ax, path):
    """Lay out the figure of ``ax``, write it to ``path`` and close it.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        Any axes of the figure.
    path : str or path-like
        The image file, in a folder that exists (its suffix chooses the format), or a binary
        file object (written as PNG).
    """
    fig = getattr(ax, "figure", None)
    if not callable(getattr(fig, "savefig", None)):
        raise ValueError(f"ax: expected matplotlib axes, got {type(ax).__name__}")
    if not callable(getattr(path, "write", None)):
        try:
            folder = Path(path).parent
        except TypeError:
            raise ValueError(f"path: expected a file name or a binary file object, got {type(path).__name__}") from None
        if not folder.is_dir():
            raise ValueError(f"path: the folder {str(folder)!r} does not exist; make it first")
        if Path(path).is_dir():
            raise ValueError(f"path: {str(path)!r} is a folder; expected a file name (e.g. in it)")
        # checked before the layout and the drawing: matplotlib names no argument when it refuses a format
        formats = fig.canvas.get_supported_filetypes()
        suffix = Path(path).suffix[1:].lower()
        if suffix and suffix not in formats:
            raise ValueError(f"path: expected a file name ending in an image format matplotlib writes "
                             f"({', '.join(sorted(formats))}), got {str(path)!r}")
    import matplotlib.pyplot as plt

    # closed whether or not the write succeeds, so that a failed save does not leave it open
    try:
        fig.tight_layout()
        fig.savefig(path, dpi=110)
    finally:
        plt.close(fig)
