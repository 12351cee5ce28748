"""The benchmark on recorded tracks: learned motion against the models a tracking engineer writes.

``kbfilter bench solent`` / ``kbfilter bench opensky``. The recorded positions of real ships (AIS,
the Solent) or aircraft (ADS-B, OpenSky) are the ground truth; the sensor is simulated over them:
position fixes with Gaussian errors of ``noise`` metres, or (``sensor="radar"``) a range-bearing
radar at the projection's origin (the recording's reference point) with errors of ``range_noise``
metres and ``bearing_noise`` radians; missing for stretches of ``gap`` steps (each step after the
first starts one with probability ``gap_rate``). Each split holds out ``test_size`` of the vehicles
(never parts of one vehicle's track) and fits every method on the others:

- ``cv``: the constant-velocity Kalman filter, its acceleration noise chosen on the training tracks
  (root mean square velocity change a step, over the step), its first velocity belief the
  training tracks' root mean square velocity;
- ``ct``: the coordinated-turn extended Kalman filter, the same acceleration noise and a turn-rate
  noise chosen on the training tracks;
- ``imm``: an interacting multiple model of the straight and the turning coordinated-turn models
  (switching probability 0.05 a step);
- ``pf``: the bootstrap particle filter on the same constant-velocity model (1,000 particles,
  systematic resampling when the effective sample size falls below half), the particle filter a
  tracking engineer would write; compared with the best hand-written Kalman model like the learned
  filters, to tell what the particles cost from what learning the motion does;
- ``learned``: :class:`~kbfilter.LearnedMotionFilter` with the step learned from the velocity
  (``inputs=(2, 3)``: it holds anywhere) and the same sensor model;
- ``learned-where``: the same, with the position among the inputs too (the motion may depend on
  where the vehicle is: channels, harbours, airways);
- ``kbf`` / ``kbf-position``: the scalable kernel Bayes filter (Nystrom kernels, kNN transition,
  default hyperparameters) on the whole state / on the position alone; its belief stays on the
  training states.

Per test track: the position RMSE over all steps and over the steps inside dropouts, the mean NEES
of the reported position covariance, the mean NIS of the innovations (filterpy's ``mahalanobis``
squared, over the steps with an observation) and the time a step. Per split: the mean over tracks. Over
splits: paired Wilcoxon tests against ``cv`` and against the best hand-written model of each split
(the lowest mean RMSE among ``cv``, ``ct`` and ``imm``), and, per other method, the test tracks
on which it is lost (RMSE above twice the split's best hand-written model's). A method that raises on a
track, or diverges on it (an infinite or NaN RMSE), has no scores there (one whose fit raised, none on
the tracks of that split): it is left out of that method's
means, counted in the report, and a track on which a learned filter is lost.

With ``smooth`` (``--smooth``) every method is scored on its smoothed estimates of the same fixes:
each one's ``smooth`` over the whole track (the IMM, which has none, and ``pf``, whose smoother needs
a transition density the constant-velocity model has not, are refused).
"""

import csv
import functools
import time
from collections import Counter
from dataclasses import asdict, dataclass
from numbers import Real

import numpy as np
from joblib import Parallel, delayed
from scipy.stats import wilcoxon

from .._validation import check_bool, check_choice, check_int, check_n_jobs, check_positive
from .._warnings import ignored, recorded, reissued, warn_user
from ..datasets import load_opensky, load_solent
from ..filters import ExtendedKalman, InteractingMultipleModel, KernelBayesFilter, LearnedMotionFilter, ParticleFilter
from ..filters.motion import LOCAL_MEANS, PROPOSALS
from ..progress import quiet_progress
from ..stats import NISRecorder, mean_nees
from ..systems import ConstantVelocity, CoordinatedTurn, PositionFixes, RangeBearing, dropouts
from .report import folder_lock, partial_name, provenance, published, writable_folder
from .runner import ON_ERROR, failure_noted

__all__ = ["RECORDINGS", "TRACK_METHODS", "HAND_WRITTEN", "DEFAULT_TRACK_METHODS", "TracksConfig", "run_tracks_split",
           "summarise_tracks", "format_tracks_table", "run_tracks_bench"]

#: the recordings the benchmark runs on, name -> loader
RECORDINGS = {"solent": load_solent, "opensky": load_opensky}

#: the methods, name -> description
TRACK_METHODS = {
    "cv": "constant-velocity Kalman filter",
    "ct": "coordinated-turn extended Kalman filter",
    "imm": "interacting multiple model of the straight and turning coordinated-turn models",
    "pf": "bootstrap particle filter on the constant-velocity model",
    "learned": "learned-motion particle filter, step learned from the velocity",
    "learned-where": "learned-motion particle filter, step learned from the position and velocity",
    "kbf": "scalable kernel Bayes filter on the position and velocity",
    "kbf-position": "scalable kernel Bayes filter on the position",
}
#: the Kalman-type models a tracking engineer writes by hand: the others are compared with the best of them
HAND_WRITTEN = ("cv", "ct", "imm")
#: what runs when no methods are given
DEFAULT_TRACK_METHODS = ("cv", "ct", "imm", "learned")
#: the methods that cannot smooth these tracks, and why (``smooth=True`` refuses them)
UNSMOOTHED = {"imm": "the IMM has no smoother",
              "pf": "its smoother weighs each move by the transition's density, which the constant-velocity model, "
                    "its process noise singular, has not"}


@dataclass(frozen=True)
class TracksConfig:
    """The settings of one benchmark on recorded tracks, checked once (:meth:`checked`).

    Parameters
    ----------
    data : {"solent", "opensky"}
        The recording.
    sensor : {"fixes", "radar"}
        Position fixes, or a range-bearing radar at the projection's origin.
    splits : int
        Train / test splits by vehicle (seeds 0, 1, ...).
    methods : tuple of str
        Names in :data:`TRACK_METHODS`.
    noise : float
        The fixes' error, metres.
    range_noise, bearing_noise : float
        The radar's errors, metres and radians.
    gap : int
        Steps in each dropout.
    gap_rate : float
        The chance that a dropout starts at a step.
    roughening : float
        The learned-motion filters' roughening constant (0: none).
    proposal : {"guided", "bootstrap"}
        How the learned-motion filters move their particles when a fix comes (see
        :class:`~kbfilter.LearnedMotionFilter`).
    local_mean : {"shrunk", "recorded", "none"}
        What the learned-motion filters do with their neighbours' mean offset (see
        :class:`~kbfilter.filters.LearnedMotion`).
    test_size : float
        The fraction of the vehicles held out in each split.
    max_test_tracks : int or None
        Score at most this many test tracks per split (the first ones; None: all), for a quick run.
    map_tracks : int
        How many test tracks of the first split the map figure draws (the longest ones).
    smooth : bool
        Score every method's smoothed estimates (its ``smooth`` over the whole track: the
        Rauch-Tung-Striebel smoother of the Kalman filters, the learned-motion filter's Gaussian
        smoother of its particles, the kernel smoother of the kernel Bayes filters) in place of
        its filtered ones; the methods that cannot smooth these tracks (:data:`UNSMOOTHED`: the
        IMM, and ``pf``, whose smoother needs a transition density) are refused. A smoother
        reports no innovations: the NIS is left out.
    """

    data: str = "solent"
    sensor: str = "fixes"
    splits: int = 10
    methods: tuple = DEFAULT_TRACK_METHODS
    noise: float = 10.0
    range_noise: float = 20.0
    bearing_noise: float = 0.002
    gap: int = 10
    gap_rate: float = 0.02
    roughening: float = 0.2
    proposal: str = "guided"
    local_mean: str = "shrunk"
    test_size: float = 0.3
    max_test_tracks: int = None
    map_tracks: int = 4
    smooth: bool = False

    @classmethod
    def checked(cls, **settings):
        """A configuration whose every setting has been checked.

        Parameters
        ----------
        **settings
            The fields of :class:`TracksConfig`; missing ones take their defaults.

        Returns
        -------
        TracksConfig
            The settings, ``methods`` as a tuple.

        Raises
        ------
        ValueError
            Naming the setting and what it should be.
        """
        unknown = sorted(set(settings) - set(cls.__dataclass_fields__))
        if unknown:
            raise ValueError(f"{unknown[0]}: not a setting of the tracks benchmark; it takes "
                             f"{', '.join(cls.__dataclass_fields__)}")
        config = cls(**settings)
        check_choice(config.data, "data", tuple(RECORDINGS))
        check_choice(config.sensor, "sensor", ("fixes", "radar"))
        check_int(config.splits, "splits", minimum=1)
        methods = (config.methods,) if isinstance(config.methods, str) else tuple(config.methods or ())
        if not methods:
            raise ValueError(f"methods: expected at least one of {', '.join(TRACK_METHODS)}")
        for m in methods:
            check_choice(m, "methods", tuple(TRACK_METHODS))
        if len(set(methods)) < len(methods):
            raise ValueError(f"methods: each method once, got {list(methods)}")
        for name in ("noise", "range_noise", "bearing_noise", "test_size"):
            check_positive(getattr(config, name), name)
        if not config.test_size < 1:
            raise ValueError(f"test_size: expected a fraction between 0 and 1, got {config.test_size!r}")
        check_int(config.gap, "gap", minimum=1)
        if not 0 <= config.gap_rate < 1:
            raise ValueError(f"gap_rate: expected a probability in [0, 1), got {config.gap_rate!r}")
        check_positive(config.roughening, "roughening", allow_zero=True)
        check_choice(config.proposal, "proposal", PROPOSALS)
        check_choice(config.local_mean, "local_mean", LOCAL_MEANS)
        if config.max_test_tracks is not None:
            check_int(config.max_test_tracks, "max_test_tracks", minimum=1)
        check_int(config.map_tracks, "map_tracks", minimum=0)
        check_bool(config.smooth, "smooth")
        unsmoothed = [m for m in methods if m in UNSMOOTHED]
        if config.smooth and unsmoothed:
            able = ", ".join(m for m in TRACK_METHODS if m not in UNSMOOTHED)
            raise ValueError(f"methods: {unsmoothed[0]} cannot smooth these tracks ({UNSMOOTHED[unsmoothed[0]]}); with "
                             f"smooth=True give methods that can ({able})")
        config.sensor_model()     # the sensor's own checks, before any work
        return cls(**{**asdict(config), "methods": methods})

    def sensor_model(self):
        """The sensor simulated over the tracks and given to the filters.

        Returns
        -------
        PositionFixes or RangeBearing
            A new sensor with the configured errors.
        """
        if self.sensor == "fixes":
            return PositionFixes(self.noise)
        return RangeBearing((0.0, 0.0), self.range_noise, self.bearing_noise)

    def describe(self, tracks):
        """One line on the recording, the sensor and the dropouts.

        Parameters
        ----------
        tracks : TrackSet
            The loaded recording.

        Returns
        -------
        str
            The line the benchmark prints first.
        """
        seen = (f"fixes with {self.noise:g} m errors" if self.sensor == "fixes" else
                f"radar at the origin, {self.range_noise:g} m and {self.bearing_noise:g} rad errors")
        gaps = f"dropouts of {self.gap} steps" if self.gap_rate > 0 else "no dropouts"
        return (f"{self.data}: {len(tracks)} tracks of {len(set(tracks.vehicles))} vehicles, step {tracks.step:g} s; "
                f"{seen}; {gaps}; {self.splits} splits holding out {self.test_size:.0%} of the vehicles"
                + ("; smoothed estimates (each method's smooth over the whole track)" if self.smooth else ""))


def _rmse(estimate, truth, rows):
    if not np.any(rows):
        return None
    return float(np.sqrt(np.mean(np.sum((estimate[rows, :2] - truth[rows, :2]) ** 2, axis=1))))


def _filters(config, train, sensor, split, on_error):
    """Each method's factory: a fresh filter for one test track (with ``on_error="record"``, a
    learned filter whose fit raised has a factory that raises its failure on every track)."""
    speed = float(np.sqrt(np.mean(np.concatenate([t[:, 2:] for t in train.tracks]) ** 2)))
    cv = ConstantVelocity.fitted(train.tracks, train.step, sensor=sensor, speed=speed)
    ct = CoordinatedTurn.fitted(train.tracks, train.step, sensor=sensor, speed=speed)
    straight = CoordinatedTurn(ct.step, ct.accel, ct.turn_noise, sensor, speed, ct.turn, turning=False)
    fixes = [sensor.observe(t, rng=np.random.default_rng([split, 0])) for t in train.tracks]
    learned = {
        "learned": lambda: LearnedMotionFilter(cv, inputs=(2, 3), roughening=config.roughening,
                                               proposal=config.proposal, local_mean=config.local_mean,
                                               random_state=split),
        "learned-where": lambda: LearnedMotionFilter(cv, roughening=config.roughening, proposal=config.proposal,
                                                     local_mean=config.local_mean, random_state=split),
        "kbf": lambda: KernelBayesFilter(approximation="nystrom", transition="knn"),
        "kbf-position": lambda: KernelBayesFilter(approximation="nystrom", transition="knn"),
    }
    factories, fit_s = {}, {}
    for name in config.methods:
        start = time.perf_counter()
        if name == "cv":
            factories[name] = lambda: ExtendedKalman(cv)
        elif name == "ct":
            factories[name] = lambda: ExtendedKalman(ct)
        elif name == "imm":
            factories[name] = lambda: InteractingMultipleModel([straight, ct], switch=0.05)
        elif name == "pf":
            factories[name] = lambda: ParticleFilter(cv, n_particles=1000, rng=split, ess_threshold=0.5)
        else:
            states = train.positions() if name == "kbf-position" else train.tracks
            try:
                with failure_noted(f"kbfilter bench: raised by the fit of method {name!r} on split {split}"):
                    fitted = learned[name]().fit(states, fixes)
            except Exception as exc:
                if on_error == "raise":
                    raise
                factories[name] = functools.partial(_fit_failed, exc)
                continue
            factories[name] = fitted.reset  # the learned filters restart from their fit on every track
        fit_s[name] = time.perf_counter() - start
    return factories, fit_s, {"accel": cv.accel, "speed": speed}


def _fit_failed(exc):
    raise RuntimeError(f"its fit raised {type(exc).__name__}: {exc}")


def run_tracks_split(config, tracks, split, on_error="record"):
    """Every method's scores on the test tracks of one split.

    Parameters
    ----------
    config : TracksConfig
        Checked settings.
    tracks : TrackSet
        The recording.
    split : int
        The split's seed: which vehicles are held out, and the sensor's draws.
    on_error : {"record", "raise"}, default="record"
        What a method that raises on a test track does: ``"record"`` gives it no scores on that
        track (its entry holds ``failed``, the message) and says so in one warning a method, the
        other tracks and methods going on; ``"raise"`` stops with the exception, noted with the
        method, the track and the split.

    Returns
    -------
    dict
        ``split``, ``n_train`` / ``n_test`` (tracks), ``fit_s`` (method -> seconds), the motion
        noise chosen for ``cv``, ``tracks`` (one dict per test track: ``vehicle``, ``steps``,
        ``missing`` and, per method, ``rmse``, ``rmse_dropouts``, ``nees``, ``ms_per_step`` and
        ``events``, what the filter's ``diagnostics`` counted, such as reacquisitions, and
        ``failed``: None, or the message of what it raised on the track) and,
        for the map (first split only), ``paths``: the ``map_tracks`` longest test tracks with
        their observations, dropout mask and every method's estimates.
    """
    on_error = check_choice(on_error, "on_error", ON_ERROR)
    train, test = tracks.split(test_size=config.test_size, random_state=split)
    sensor = config.sensor_model()
    rows, paths, failures = [], [], {}
    # the bench's own bar counts the splits; the fits inside one are quiet. Reacquisitions and fit
    # reports would repeat on every track: each filter's diagnostics (what it counted) go into its
    # scores instead
    with ignored(), quiet_progress():
        factories, fit_s, noise = _filters(config, train, sensor, split, on_error)
        scored = test.tracks if config.max_test_tracks is None else test.tracks[:config.max_test_tracks]
        # the map shows the longest scored tracks of the first split: most motion for the space
        longest = np.argsort([-len(t) for t in scored], kind="stable")[:config.map_tracks]
        drawn = set(longest.tolist()) if split == 0 else set()
        for i, (track, vehicle) in enumerate(zip(scored, test.vehicles)):
            rng = np.random.default_rng([split, 1, i])
            zs, missing = dropouts(sensor.observe(track, rng=rng), rng=rng, rate=config.gap_rate,
                                   length=(config.gap, config.gap))
            row = {"vehicle": vehicle, "steps": len(track), "missing": int(missing.sum())}
            estimates = {}
            for name, factory in factories.items():
                try:
                    filt = factory()
                    innovations = NISRecorder(filt)  # a smoother hands it nothing: its NIS is None
                    start = time.perf_counter()
                    with failure_noted(f"kbfilter bench: raised by method {name!r} on test track {i} (vehicle "
                                       f"{vehicle!r}) of split {split}"):
                        if config.smooth:
                            means, covs = filt.smooth(zs)
                        else:
                            means, covs, _, _ = filt.batch_filter(zs, saver=innovations)
                except Exception as exc:  # one track's failure costs that track's scores, not the study
                    if on_error == "raise":
                        raise
                    failures.setdefault(name, []).append((i, vehicle, f"{type(exc).__name__}: {exc}"))
                    row[name] = {**dict.fromkeys(_TRACK_FIELDS), "events": {}, "failed": failures[name][-1][2]}
                    continue
                elapsed = time.perf_counter() - start - innovations.seconds
                estimates[name] = means[:, :2]
                row[name] = {"rmse": _rmse(means, track, np.ones(len(track), bool)),
                             "rmse_dropouts": _rmse(means, track, missing),
                             # the position's: every model has it, whatever else its state holds
                             "nees": mean_nees(track[:, :2], means[:, :2], covs[:, :2, :2]),
                             "nis": innovations.mean(),
                             "ms_per_step": 1e3 * elapsed / len(track),
                             "events": {k: int(v) for k, v in dict(getattr(filt, "diagnostics", {})).items()},
                             "failed": None}
            rows.append(row)
            if i in drawn:
                observed = (np.array([np.full(2, np.nan) if z is None else z for z in zs])
                            if config.sensor == "fixes" else None)
                paths.append({"vehicle": vehicle, "truth": track[:, :2], "observations": observed,
                              "missing": missing, "estimates": estimates})
    for name, failed in failures.items():  # outside the block that silences the fits
        i, vehicle, message = failed[0]
        warn_user(f"run_tracks_split: method {name!r} failed on {len(failed)} of the {len(rows)} test tracks of split "
                  f"{split} (first on track {i}, vehicle {vehicle!r}: {message}); it has no scores on them, the "
                  f"other tracks and methods are kept; run_tracks_split(config, tracks, {split}, on_error='raise') "
                  f"repeats the split with its traceback (on the command line, --on-error raise stops at it)",
                  UserWarning)
    return {"split": split, "n_train": len(train), "n_test": len(test), "fit_s": fit_s, **noise, "tracks": rows,
            "paths": paths}


def _mean(values):
    values = [v for v in values if v is not None and np.isfinite(v)]
    return float(np.mean(values)) if values else None


def _paired(values, reference):
    """Splits where ``values`` is below ``reference``, and the paired Wilcoxon p-value."""
    pairs = [(a, b) for a, b in zip(values, reference) if a is not None and b is not None]
    if not pairs:
        return 0, None
    a, b = np.array(pairs).T
    wins = int(np.sum(a < b))
    if len(pairs) < 2 or np.all(a == b):
        return wins, None
    return wins, float(wilcoxon(a, b).pvalue)


#: what every method's entry of a scored test track holds, and what summarise_tracks reads of it
_TRACK_FIELDS = ("rmse", "rmse_dropouts", "nees", "nis", "ms_per_step")


def _scored(scores):
    """Whether a method's entry of a test track counts in the means: it ran, and did not diverge."""
    return scores.get("failed") is None and scores["rmse"] is not None and np.isfinite(scores["rmse"])


def _checked_results(results, methods):
    """``results`` and ``methods`` as lists, checked as :func:`summarise_tracks` reads them: every
    test track holds each method's scores, each None or a non-negative number, finite unless the
    method diverged on the track (its RMSE infinite or NaN), all None where it failed."""
    methods = list(methods) if isinstance(methods, (list, tuple)) else None
    if not methods or not all(isinstance(m, str) for m in methods) or len(set(methods)) != len(methods):
        raise ValueError("methods: expected a non-empty list of distinct method names")
    results = list(results) if isinstance(results, (list, tuple)) else None
    if not results or not all(isinstance(s, dict) and isinstance(s.get("tracks"), list) and s["tracks"]
                              for s in results):
        raise ValueError("results: expected the non-empty list of splits run_tracks_split returns, each with a "
                         "non-empty list of test tracks")
    for i, split in enumerate(results):
        for j, track in enumerate(split["tracks"]):
            for m in methods:
                scores = track.get(m) if isinstance(track, dict) else None
                if not (isinstance(scores, dict) and all(f in scores for f in _TRACK_FIELDS)):
                    raise ValueError(f"results[{i}]['tracks'][{j}][{m!r}]: expected the method's scores, with "
                                     f"{', '.join(_TRACK_FIELDS)}")
                failed = scores.get("failed")
                if failed is not None and not (isinstance(failed, str)
                                               and all(scores[f] is None for f in _TRACK_FIELDS)):
                    raise ValueError(f"results[{i}]['tracks'][{j}][{m!r}]['failed']: expected None, or the message "
                                     f"of a failure with every score None, got {failed!r}")
                rmse = scores["rmse"]
                diverged = isinstance(rmse, Real) and not isinstance(rmse, bool) and not np.isfinite(rmse)
                for f in _TRACK_FIELDS:
                    value = scores[f]
                    if value is not None and (isinstance(value, bool) or not isinstance(value, Real)
                                              or (not diverged and not np.isfinite(value)) or value < 0):
                        raise ValueError(f"results[{i}]['tracks'][{j}][{m!r}][{f!r}]: expected None or a "
                                         f"non-negative number (finite unless the RMSE is not), got {value!r}")
                if not isinstance(scores.get("events", {}), dict):
                    raise ValueError(f"results[{i}]['tracks'][{j}][{m!r}]['events']: expected a dict of counts")
    return results, methods


def summarise_tracks(results, methods):
    """Per split, each method's mean over its test tracks; over splits, the comparisons.

    Parameters
    ----------
    results : list of dict
        What :func:`run_tracks_split` returns, one per split.
    methods : sequence of str
        The methods that ran.

    Returns
    -------
    dict
        ``splits`` (metric -> method -> one value a split, ``best-hand`` included when a
        hand-written model ran), ``best_hand_model`` (one name a split), ``compared`` (metric ->
        method -> reference -> ``{"wins": splits, "p": Wilcoxon p}``), ``ratio_to_best_hand``
        (method -> mean RMSE over the best hand-written model's), ``lost`` / ``better`` (method ->
        test tracks where its RMSE is above twice / below the split's best hand-written model's),
        ``test_tracks``, ``ms_per_step`` (method -> mean over tracks), ``nees_median_track`` and
        ``nis_median_track`` (method -> the median over test tracks of their mean NEES / NIS),
        ``events`` (method -> what its diagnostics counted, summed over tracks) and ``left_out``
        (method -> ``{"failed": tracks, "diverged": tracks}``).

        A method's means are over the test tracks it was scored on: one it raised on, or diverged
        on (an infinite or NaN RMSE), is left out of them and counted in ``left_out``, and is a
        track on which it is lost.
    """
    results, methods = _checked_results(results, methods)
    table = {"splits": {}}
    for key in ("rmse", "rmse_dropouts", "nees", "nis"):
        table["splits"][key] = {m: [_mean([r[m][key] for r in s["tracks"] if _scored(r[m])]) for s in results]
                                for m in methods}
    entries = {m: [r[m] for s in results for r in s["tracks"]] for m in methods}
    table["left_out"] = {m: {"failed": sum(e.get("failed") is not None for e in entries[m]),
                             "diverged": sum(e.get("failed") is None and not _scored(e) for e in entries[m])}
                         for m in methods}
    hand = [m for m in HAND_WRITTEN if m in methods]
    learned = [m for m in methods if m not in HAND_WRITTEN]
    table["test_tracks"] = int(sum(len(s["tracks"]) for s in results))
    table["ms_per_step"] = {m: _mean([r[m]["ms_per_step"] for s in results for r in s["tracks"]]) for m in methods}
    table["events"] = {}
    for m in methods:
        totals = Counter()
        for s in results:
            for r in s["tracks"]:
                totals.update(r[m].get("events", {}))
        # a filter that reports a kind it never took (the EKF's pseudo_inverse 0) counted nothing
        totals = +totals
        table["events"][m] = dict(totals)
    # a few steps with a collapsed covariance can dominate a mean NEES; the median track says
    # what is typical
    for key in ("nees", "nis"):
        table[f"{key}_median_track"] = {}
        for m in methods:
            values = [e[key] for e in entries[m] if _scored(e) and e[key] is not None]
            table[f"{key}_median_track"][m] = float(np.median(values)) if values else None
    table["compared"], table["lost"], table["better"], table["ratio_to_best_hand"] = {}, {}, {}, {}
    if hand:
        split_rmse = table["splits"]["rmse"]
        best = [min(hand, key=lambda m: np.inf if split_rmse[m][i] is None else split_rmse[m][i])
                for i in range(len(results))]
        table["best_hand_model"] = best
        for key in ("rmse", "rmse_dropouts"):
            table["splits"][key]["best-hand"] = [table["splits"][key][b][i] for i, b in enumerate(best)]
        for m in learned:
            ours = [np.array([r[m]["rmse"] if _scored(r[m]) else np.inf for r in s["tracks"]]) for s in results]
            theirs = [np.array([r[b]["rmse"] for r in s["tracks"]], float) for s, b in zip(results, best)]
            table["lost"][m] = int(sum(np.sum(a > 2 * b) for a, b in zip(ours, theirs)))
            table["better"][m] = int(sum(np.sum(a < b) for a, b in zip(ours, theirs)))
            mine, reference = _mean(table["splits"]["rmse"][m]), _mean(table["splits"]["rmse"]["best-hand"])
            table["ratio_to_best_hand"][m] = None if mine is None or reference is None else mine / reference
    for key in ("rmse", "rmse_dropouts"):
        table["compared"][key] = {}
        for m in methods:
            references = [r for r in ("cv", "best-hand") if r in table["splits"][key] and r != m
                          and not (r == "best-hand" and m in HAND_WRITTEN)]
            table["compared"][key][m] = {}
            for r in references:
                wins, p = _paired(table["splits"][key][m], table["splits"][key][r])
                table["compared"][key][m][r] = {"wins": wins, "p": p}
    return table


def _number(value, digits=1):
    if value is None:
        return "-"
    return f"{value:.3g}" if abs(value) >= 1e5 else f"{value:.{digits}f}"


def format_tracks_table(summary, splits):
    """The benchmark's report as text.

    Parameters
    ----------
    summary : dict
        What :func:`summarise_tracks` returns.
    splits : int
        How many splits ran.

    Returns
    -------
    str
        The tables and the comparisons, one line each.
    """
    if not (isinstance(summary, dict)
            and all(k in summary for k in ("splits", "ms_per_step", "nees_median_track", "nis_median_track"))
            and isinstance(summary["splits"], dict) and "rmse" in summary["splits"]):
        raise ValueError("summary: expected what summarise_tracks returns")
    splits = check_int(splits, "splits")
    lines = []
    methods = list(summary["splits"]["rmse"])
    for key, label in (("rmse", "position RMSE, m"), ("rmse_dropouts", "position RMSE inside dropouts, m")):
        lines.append(f"{label} (mean / median of the {splits} splits' means over their test tracks)")
        for m in methods:
            values = [v for v in summary["splits"][key][m] if v is not None]
            line = (f"  {m:<14} {_number(np.mean(values) if values else None):>9} / "
                    f"{_number(np.median(values) if values else None):<9}")
            for reference, cell in summary["compared"].get(key, {}).get(m, {}).items():
                p = "-" if cell["p"] is None else f"{cell['p']:.3g}"
                line += f"  | below {reference} in {cell['wins']}/{splits} splits, Wilcoxon p = {p}"
            lines.append(line)
    for key, label in (("nees", "mean NEES of the reported position covariance"),
                       ("nis", "mean NIS of the innovations, filterpy's mahalanobis squared")):
        means = {m: _mean(summary["splits"][key][m]) for m in summary["splits"][key]}
        lines.append(f"{label} (2 for a consistent filter; in brackets the median track's): " + ", ".join(
            f"{m} {_number(v, 2)} ({_number(summary[f'{key}_median_track'][m], 2)})" for m, v in means.items()))
    if "best_hand_model" in summary:
        lines.append(f"best hand-written model by split: {', '.join(summary['best_hand_model'])}")
        for m in summary["lost"]:
            ratio = summary["ratio_to_best_hand"][m]
            lines.append(f"{m}: mean RMSE {_number(ratio, 3)} x the best hand-written model's; better on "
                         f"{summary['better'][m]} and lost (RMSE above twice its) on {summary['lost'][m]} of "
                         f"{summary['test_tracks']} test tracks")
    left_out = {m: ", ".join(f"{n} {kind}" for kind, n in counts.items() if n)
                for m, counts in summary.get("left_out", {}).items() if any(counts.values())}
    if left_out:
        lines.append(f"left out of the means, of {summary['test_tracks']} test tracks (a learned filter is lost on "
                     f"them): " + "; ".join(f"{m} {what}" for m, what in left_out.items()))
    counted = {m: e for m, e in summary.get("events", {}).items() if e}
    if counted:
        lines.append("counted over every test track: " + "; ".join(
            f"{m} " + ", ".join(f"{k} {v}" for k, v in sorted(e.items())) for m, e in counted.items()))
    lines.append("ms a step: " + ", ".join(f"{m} {_number(v, 2)}" for m, v in summary["ms_per_step"].items()))
    return "\n".join(lines)


def _write(out, config, tracks, results, summary, report, command):
    """results.json, results.csv and tracks.png, all or none (:func:`~kbfilter.bench.report.published`)."""
    splits = [{k: v for k, v in s.items() if k != "paths"} for s in results]
    record = {"recording": config.data, "attribution": tracks.attribution, "provenance": provenance(None, command),
              "config": asdict(config), "summary": summary, "report": report, "splits": splits}
    return published(out, record, lambda: _write_table_and_map(out, config, splits, results[0]["paths"]))


def _write_table_and_map(out, config, splits, drawn):
    """results.csv and tracks.png, each under its temporary name; returns the final names."""
    from ..plots import plot_tracks, save_figure

    paths = [out / "results.csv"]
    with open(partial_name(paths[0]), "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["split", "vehicle", "steps", "missing", "method", "rmse", "rmse_dropouts", "nees", "nis",
                         "ms_per_step", "failed"])
        for s in splits:
            for r in s["tracks"]:
                for m in config.methods:
                    writer.writerow([s["split"], r["vehicle"], r["steps"], r["missing"], m, r[m]["rmse"],
                                     r[m]["rmse_dropouts"], r[m]["nees"], r[m]["nis"], r[m]["ms_per_step"],
                                     r[m].get("failed") or ""])
    if drawn:
        paths.append(out / "tracks.png")
        axes = plot_tracks([p["truth"] for p in drawn], [p["estimates"] for p in drawn],
                           observations=[p["observations"] for p in drawn], missing=[p["missing"] for p in drawn],
                           titles=[f"{config.data} vehicle {p['vehicle']}" for p in drawn])
        save_figure(axes[0], partial_name(paths[-1]))
    return paths


def run_tracks_bench(config, out, n_jobs=None, progress=True, print_fn=print, command=None, on_error="record"):
    """Run the benchmark on a recording, print its report and write it to ``out``.

    Parameters
    ----------
    config : TracksConfig
        Checked settings (:meth:`TracksConfig.checked`).
    out : str or path-like
        The results folder: ``results.json`` (settings, provenance, summary, every track's
        scores), ``results.csv`` (one row per track and method) and ``tracks.png`` (a map of some
        test tracks with the estimates).
    n_jobs : int or None
        Splits run in parallel (joblib).
    progress : bool, default=True
        A line as each split finishes.
    print_fn : callable, default=print
        Where the report goes.
    command : list of str, optional
        The command line recorded in ``results.json``.
    on_error : {"record", "raise"}, default="record"
        What a method that raises on a test track does (:func:`run_tracks_split`).

    Returns
    -------
    results : list of dict
        What :func:`run_tracks_split` returns, one per split.
    summary : dict
        What :func:`summarise_tracks` returns.
    """
    if not isinstance(config, TracksConfig):
        raise ValueError(f"config: expected a TracksConfig (TracksConfig.checked(...)), got {type(config).__name__}")
    check_n_jobs(n_jobs)
    progress = check_bool(progress, "progress")
    on_error = check_choice(on_error, "on_error", ON_ERROR)
    out = writable_folder(out)  # before the run, so that its results cannot be lost at the end
    tracks = RECORDINGS[config.data]()
    print_fn(config.describe(tracks))
    print_fn(tracks.attribution)
    with folder_lock(out):
        start = time.perf_counter()
        results, caught = [], []
        for result, messages in Parallel(n_jobs=n_jobs, return_as="generator")(
                delayed(recorded)(run_tracks_split, config, tracks, s, on_error) for s in range(config.splits)):
            results.append(result)
            caught += messages
            if progress:
                scored = {m: [r[m]["rmse"] for r in result["tracks"] if _scored(r[m])] for m in config.methods}
                left = {m: len(result["tracks"]) - len(v) for m, v in scored.items()}
                print_fn(f"split {result['split']}: {len(result['tracks'])} test tracks; mean RMSE " + ", ".join(
                    f"{m} {_number(_mean(v))}" + (f" ({left[m]} left out)" if left[m] else "")
                    for m, v in scored.items()))
        reissued(caught)  # once each, at the caller's line, not at each worker's
        summary = summarise_tracks(results, config.methods)
        report = format_tracks_table(summary, config.splits)
        print_fn(report)
        paths = _write(out, config, tracks, results, summary, report, command)
    print_fn(f"\n{time.perf_counter() - start:.0f} s; wrote " + ", ".join(str(p) for p in paths))
    return results, summary
