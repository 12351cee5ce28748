"""The figure helpers: what they draw, and arguments that do not fit refused by name before a figure is made."""

import io
import warnings

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import kbfilter as kb  # noqa: E402
from kbfilter.plots import plot_frames, plot_map, plot_mse_box, plot_tracks, plot_trajectory, save_figure  # noqa: E402

STATES = np.column_stack([np.linspace(0.0, 1.0, 20), np.linspace(1.0, 0.0, 20)])
_ROOM = kb.systems.RobotInRoom()


def test_the_trajectory_panels_draw_each_method_and_title_its_mse():
    ax = plot_trajectory(STATES, {"m": STATES + 0.1}, steps=10)
    assert "MSE 0.02 (10 steps, all 2 coordinates)" in ax.get_title()
    np.testing.assert_allclose(ax.get_lines()[1].get_xydata(), STATES[:10] + 0.1)
    # which line is the truth is said, not left to the colour
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["true state", "m"]
    # a method that failed (NaN) is drawn with gaps, not refused
    plot_trajectory(STATES, {"m": np.full_like(STATES, np.nan)})
    plt.close("all")


def test_the_trajectory_errors_of_perfect_or_overflowing_estimates_are_drawn_without_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's overflow, and matplotlib's log scale of nothing positive
        ax = plot_trajectory(STATES, {"exact": STATES, "huge": STATES + 1e300})
    assert ax.get_title().startswith("exact: MSE 0 ") and ax.figure.axes[1].get_title().startswith("huge: MSE inf ")
    plt.close("all")


def test_the_mse_boxes_take_one_run_as_a_number_and_leave_failed_runs_out_counted():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an infinite MSE had numpy warn from inside matplotlib's quartiles
        ax = plot_mse_box({"kbf": 0.05, "ekf": [0.06, np.nan, 0.08], "ukf": [np.inf, 0.1, 0.3]})
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["median", "mean"]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["kbf", "ekf\n(1 of 3 not finite)",
                                                              "ukf\n(1 of 3 not finite)"]
    # each box's mean, the one marker it draws
    means = [line.get_ydata()[0] for line in ax.get_lines() if len(line.get_xdata()) == 1]
    assert means == pytest.approx([0.05, 0.07, 0.2])
    plt.close("all")


@pytest.mark.parametrize("call, message", [
    (lambda: plot_trajectory(STATES, {"m": STATES[:5]}), r"estimates\['m'\]: expected 20 rows"),
    (lambda: plot_trajectory(STATES, STATES), "estimates: expected a dict of method names"),
    (lambda: plot_trajectory(STATES, {"m": STATES}, steps=0), "steps: expected an integer >= 1"),
    (lambda: plot_trajectory(np.full((3, 2), np.nan), {}), "states: contains NaN"),
    (lambda: plot_mse_box({}), "mse_by_method: expected a dict"),
    (lambda: plot_mse_box({"a": ["x"]}), r"mse_by_method\['a'\]: expected a numeric array"),
    (lambda: plot_mse_box({"a": [0.1, -0.2]}), r"mse_by_method\['a'\]: expected mean squared errors \(>= 0\), got -0.2"),
    (lambda: plot_frames([np.zeros((4, 4))] * 3, ["a"]), r"titles: expected one entry a frame \(3\), got 1"),
    (lambda: plot_frames([np.zeros(3)], ["a"]), r"frames\[0\]: expected a numeric image"),
    (lambda: plot_frames([], []), "frames: expected at least one image"),
    # these raised a TypeError (None has no len(), is not iterable) or an AttributeError
    (lambda: plot_frames(None, ["a"]), "frames: expected a list of images, got NoneType"),
    (lambda: plot_frames([np.zeros((4, 4))], None), r"titles: expected a list with one entry a frame"),
    (lambda: plot_frames([np.zeros((4, 4))], ["a"], marks=[1]), r"marks\[0\]: expected a dict of labels"),
    (lambda: plot_tracks(None, [{"cv": STATES}]), "truths: expected a list of tracks"),
    (lambda: plot_tracks(STATES, [{"cv": STATES}]), r"truths: expected a list of tracks.*\(one track is \[track\]\)"),
    (lambda: plot_tracks([STATES], None), "estimates: expected a list with one entry a track"),
    (lambda: plot_tracks([STATES], [{"cv": STATES}, {"cv": STATES}]), r"estimates: expected one entry a track \(1\)"),
    (lambda: plot_tracks([STATES], [{"cv": STATES[:3]}]), r"estimates\[0\]\['cv'\]: expected 20 rows"),
    (lambda: plot_tracks([STATES], [{"cv": STATES}], titles="a"), "titles: expected a list with one entry a track"),
    (lambda: plot_trajectory(STATES, {}), "estimates: expected at least one method's estimates"),
    (lambda: plot_tracks([STATES], [{"cv": STATES}], axes=[]), r"axes: expected 1 matplotlib axes \(one a track\)"),
    (lambda: plot_tracks([STATES], [{"cv": STATES}], axes=["a"]), "axes: expected 1 matplotlib axes .* got 1 str"),
    (lambda: plot_tracks([STATES], [{"cv": STATES}], observations=[STATES[:, 0]]),
     r"observations\[0\]: expected 20 rows \(one a true state\) of at least 2 columns, got shape \(20, 1\)"),
    (lambda: plot_tracks([STATES], [{"cv": STATES}], observations=[STATES[:4]]),
     r"observations\[0\]: expected 20 rows"),
    (lambda: plot_tracks([STATES], [{"cv": STATES}], missing=[np.zeros(4, bool)]),
     r"missing\[0\]: expected 20 booleans"),
    (lambda: plot_map(_ROOM, STATES, {}, {"m": {3: STATES[:, :1]}}),
     r"particles\['m'\]\[3\]: expected particles of at least 2"),
    (lambda: plot_map(_ROOM, STATES, {}, {"m": {3: STATES}}, weights={"m": {3: np.ones(4)}}),
     r"weights\['m'\]\[3\]: expected 20 non-negative finite weights"),
    (lambda: plot_map(_ROOM, STATES, {}, {"m": STATES}), r"particles\['m'\]: expected a dict"),
])
def test_arguments_that_do_not_fit_are_refused_by_name_before_a_figure_is_made(call, message):
    before = plt.get_fignums()
    with pytest.raises(ValueError, match=message):
        call()
    assert plt.get_fignums() == before


def test_too_few_axes_are_refused_before_anything_is_drawn():
    _, axes = plt.subplots(1, 2)
    with pytest.raises(ValueError, match=r"axes: expected 3 matplotlib axes \(one a method, then one for the "
                                         r"errors\), got 2 Axes"):
        plot_trajectory(STATES, {"a": STATES, "b": STATES}, axes=axes)
    with pytest.raises(ValueError, match=r"axes: expected 3 matplotlib axes \(one a frame\), got 2"):
        plot_frames([np.zeros((4, 4))] * 3, ["a"] * 3, axes=axes)
    assert not any(ax.lines or ax.images for ax in axes)
    # enough of them, in any nesting, are drawn on
    assert plot_frames([np.zeros((4, 4))] * 2, ["a"] * 2, axes=[[axes[0]], [axes[1]]]) is axes[0]
    assert all(ax.images for ax in axes)
    plt.close("all")


def test_a_figure_is_saved_where_asked_and_a_destination_that_cannot_be_is_refused_before_drawing(tmp_path):
    ax = plot_mse_box({"a": [1.0, 2.0]})
    with pytest.raises(ValueError, match="path: the folder .*missing.* does not exist; make it first"):
        save_figure(ax, tmp_path / "missing" / "box.png")
    with pytest.raises(ValueError, match="ax: expected matplotlib axes, got str"):
        save_figure("box", tmp_path / "box.png")
    (tmp_path / "figures").mkdir()
    with pytest.raises(ValueError, match="path: .*figures' is a folder; expected a file name"):
        save_figure(ax, tmp_path / "figures")
    assert [p.name for p in tmp_path.iterdir()] == ["figures"] and not list((tmp_path / "figures").iterdir())
    save_figure(ax, tmp_path / "box.png")
    assert (tmp_path / "box.png").read_bytes()[:4] == b"\x89PNG"
    buffer = io.BytesIO()
    other = plot_mse_box({"a": [1.0, 2.0]})
    save_figure(other, buffer)
    assert buffer.getvalue()[:4] == b"\x89PNG"
    # a format matplotlib does not write is named by the argument before drawing (matplotlib's own
    # error named none), and the figure stays open to be saved again
    unsaved = plot_mse_box({"a": [1.0, 2.0]})
    with pytest.raises(ValueError, match=r"^path: expected a file name ending in an image format matplotlib writes "
                                         r"\(.*png.*\), got '.*box.nope'$"):
        save_figure(unsaved, tmp_path / "box.nope")
    assert unsaved.figure.number in plt.get_fignums() and not (tmp_path / "box.nope").exists()
    plt.close(unsaved.figure)

    class Full(io.BytesIO):
        def write(self, data):
            raise OSError("no space left on device")

    # a write that fails still closes the figure
    failing = plot_mse_box({"a": [1.0, 2.0]})
    with pytest.raises(OSError, match="no space left"):
        save_figure(failing, Full())
    assert failing.figure.number not in plt.get_fignums()
