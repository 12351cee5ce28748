"""Recorded tracks as training and test sequences: projection, resampling, splits by vehicle.

A recording is a table of position reports (time, vehicle, latitude, longitude). Loading it

1. drops reports with no finite position, outside ``bounds``, or (``max_speed``) implying a speed
   from the vehicle's previous kept report no vehicle of the kind reaches (a corrupt fix);
2. projects every position to east / north metres on a plane: the azimuthal equidistant
   projection of a sphere of the Earth's mean radius about one origin for the whole recording
   (unless given, the centre of the smallest latitude / longitude box holding its positions, which
   may cross the 180th meridian), which keeps distances and
   directions from the origin exact on the sphere and distorts lengths by less than 0.04 % within
   300 km of it;
3. cuts each vehicle's reports where two consecutive ones are more than ``max_gap`` seconds apart,
   so that no motion is invented across a gap, and resamples each piece to a fixed ``step`` by linear
   interpolation of the positions between reports;
4. adds the velocity at each step as the central difference of the resampled positions (one-sided
   at the ends), so that positions and velocities agree, and keeps the pieces of at least
   ``min_length`` steps.

The result is a :class:`TrackSet`: a list of arrays of shape (n_i, 4) holding east, north,
east velocity and north velocity, ready for ``fit``, with the vehicles, the times and the origin.
"""

import csv
from dataclasses import dataclass, field, replace
from importlib import resources
from numbers import Integral

import numpy as np

from .._validation import check_int, check_path, check_positive, check_rng
from .._warnings import ignored

__all__ = ["EARTH_RADIUS", "TrackSet", "project", "unproject", "load_tracks_csv", "load_opensky", "load_solent"]

#: the Earth's mean radius (IUGG), metres: the sphere of the projection
EARTH_RADIUS = 6_371_008.8
#: the most rows a loaded recording may resample to (about 4 GB of tracks and times)
MAX_RESAMPLED_ROWS = 10**8
#: one knot in metres a second
KNOT = 1852.0 / 3600.0


def _degrees(values, name, n, what):
    """``values`` as ``n`` finite floats, else a ValueError naming ``name`` and saying ``what``."""
    try:
        numbers = tuple(float(v) for v in values)
    except (TypeError, ValueError):
        numbers = ()
    if len(numbers) != n or not all(np.isfinite(numbers)):
        raise ValueError(f"{name}: expected {what} in degrees, got {values!r}")
    return numbers


def _coordinates(a, b, names):
    """Two arrays of the same shape of finite numbers, else a ValueError naming them."""
    try:
        a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{names}: expected arrays of numbers ({exc})") from None
    if a.shape != b.shape:
        raise ValueError(f"{names}: expected arrays of the same shape, got {a.shape} and {b.shape}")
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        raise ValueError(f"{names}: expected finite numbers, got NaN or infinite values")
    return a, b


def _origin(origin):
    lat0, lon0 = _degrees(origin, "origin", 2, "(latitude, longitude)")
    if not (-90.0 < lat0 < 90.0 and -180.0 <= lon0 <= 180.0):
        raise ValueError(f"origin: expected (latitude, longitude) in degrees, got {origin!r}")
    return lat0, lon0


def _central_longitude(lon):
    """The middle of the shortest arc of longitude holding every ``lon``: the arc leaves out the
    widest gap between neighbouring longitudes, which is the one across the 180th meridian unless
    another is wider (a recording over the Pacific)."""
    east = np.unique(np.mod(lon, 360.0))
    gaps = np.diff(np.r_[east, east[0] + 360.0])
    widest = len(gaps) - 1 if gaps[-1] >= gaps.max() else int(np.argmax(gaps))
    start = east[(widest + 1) % len(east)]
    centre = start + (360.0 - gaps[widest]) / 2
    return float((centre + 180.0) % 360.0 - 180.0)


def project(lat, lon, origin):
    """East and north metres of positions, on the azimuthal equidistant plane about ``origin``.

    Parameters
    ----------
    lat, lon : array-like
        Latitudes (within +-90) and longitudes in degrees, finite and of the same shape.
    origin : (float, float)
        Latitude and longitude of the plane's origin, in degrees.

    Returns
    -------
    east, north : ndarray
        Metres; ``hypot(east, north)`` is the great-circle distance from the origin on a sphere of
        radius :data:`EARTH_RADIUS`.

    Examples
    --------
    >>> east, north = project([51.0], [0.0], origin=(50.0, 0.0))
    >>> round(float(north[0]))  # one degree of latitude on the sphere
    111195
    """
    lat0, lon0 = np.radians(_origin(origin))
    lat, lon = _coordinates(lat, lon, "lat, lon")
    if np.any(np.abs(lat) > 90):
        raise ValueError(f"lat: expected latitudes within +-90 degrees, got {lat[np.abs(lat) > 90].flat[0]!r}")
    phi, lam = np.radians(lat), np.radians(lon)
    dlam = lam - lon0
    cos_c = np.clip(np.sin(lat0) * np.sin(phi) + np.cos(lat0) * np.cos(phi) * np.cos(dlam), -1.0, 1.0)
    c = np.arccos(cos_c)
    # c / sin(c) -> 1 at the origin; written through sinc to stay exact there
    k = 1.0 / np.sinc(c / np.pi)
    east = EARTH_RADIUS * k * np.cos(phi) * np.sin(dlam)
    north = EARTH_RADIUS * k * (np.cos(lat0) * np.sin(phi) - np.sin(lat0) * np.cos(phi) * np.cos(dlam))
    return east, north


def unproject(east, north, origin):
    """Latitudes and longitudes of plane positions: the inverse of :func:`project`.

    Parameters
    ----------
    east, north : array-like
        Metres on the plane about ``origin``, finite, of the same shape, and at most half the
        Earth's circumference (``pi * EARTH_RADIUS``) from it.
    origin : (float, float)
        Latitude and longitude of the plane's origin, in degrees.

    Returns
    -------
    lat, lon : ndarray
        Degrees.

    Examples
    --------
    >>> lat, lon = unproject(*project([50.9], [-1.4], (50.8, -1.2)), (50.8, -1.2))
    >>> bool(abs(lat[0] - 50.9) < 1e-9 and abs(lon[0] + 1.4) < 1e-9)
    True
    """
    lat0, lon0 = np.radians(_origin(origin))
    x, y = _coordinates(east, north, "east, north")
    rho = np.hypot(x, y)
    # the plane holds the sphere within half its circumference of the origin; beyond, no point
    if np.any(rho > np.pi * EARTH_RADIUS * (1 + 1e-12)):
        raise ValueError(f"east, north: expected positions within pi x EARTH_RADIUS = {np.pi * EARTH_RADIUS:.0f} m of "
                         f"the origin (the distance to its antipode), got one {rho.max():.3g} m from it")
    c = rho / EARTH_RADIUS
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(rho > 0, y * np.sin(c) / rho, 0.0)
    phi = np.arcsin(np.clip(np.cos(c) * np.sin(lat0) + ratio * np.cos(lat0), -1.0, 1.0))
    lam = lon0 + np.arctan2(x * np.sin(c), rho * np.cos(lat0) * np.cos(c) - y * np.sin(lat0) * np.sin(c))
    return np.degrees(phi), (np.degrees(lam) + 180.0) % 360.0 - 180.0


@dataclass(frozen=True)
class TrackSet:
    """Resampled tracks of a recording, in metres on one plane (what the loaders return).

    Parameters
    ----------
    tracks : list of ndarray of shape (n_i, 4)
        One array per piece of track: east, north (m), east velocity, north velocity (m/s), one row
        every ``step`` seconds. Pass ``tracks`` (or :meth:`positions`) to a filter's ``fit``.
    times : list of ndarray of shape (n_i,)
        The times of the rows, seconds after the recording's first report.
    vehicles : list of str
        The vehicle each piece belongs to (a vehicle with a long gap gives several pieces).
    step : float
        Seconds between rows.
    origin : (float, float)
        Latitude and longitude of the plane's origin.
    attribution : str
        Where the recording comes from, to be kept with results made from it.
    dropped : dict
        How many reports loading dropped, by reason (``no_time``, ``no_position``,
        ``outside_bounds``, ``implausible_speed``, ``repeated_time``).
    """

    tracks: list
    times: list
    vehicles: list
    step: float
    origin: tuple
    attribution: str = ""
    dropped: dict = field(default_factory=dict)

    def __len__(self):
        return len(self.tracks)

    def positions(self):
        """The tracks' east / north columns.

        Returns
        -------
        list of ndarray of shape (n_i, 2)
            Metres.
        """
        return [track[:, :2] for track in self.tracks]

    def subset(self, vehicles):
        """The pieces of the given vehicles.

        Parameters
        ----------
        vehicles : iterable of str
            Vehicle identifiers, each one of :attr:`vehicles`.

        Returns
        -------
        TrackSet
            The same recording, restricted to those vehicles.
        """
        if isinstance(vehicles, str):
            raise ValueError(f"vehicles: expected a list of identifiers, got the string {vehicles!r} (pass "
                             f"[{vehicles!r}] for one vehicle)")
        keep = set(vehicles)
        if not keep:
            raise ValueError("vehicles: expected at least one identifier, got none")
        unknown = sorted(keep - set(self.vehicles), key=str)
        if unknown:
            raise ValueError(f"vehicles: {unknown[:5]}{' ...' if len(unknown) > 5 else ''} are not in this recording")
        index = [i for i, v in enumerate(self.vehicles) if v in keep]
        return replace(self, tracks=[self.tracks[i] for i in index], times=[self.times[i] for i in index],
                       vehicles=[self.vehicles[i] for i in index])

    def split(self, test_size=0.3, random_state=None):
        """Training and test tracks, split by vehicle: every piece of a vehicle goes to one side.

        Parameters
        ----------
        test_size : float or int, default=0.3
            The fraction of the vehicles held out (at least one, and at least one left), or, an
            integer, how many (as scikit-learn's ``train_test_split`` reads it).
        random_state : int, Generator or None
            Which vehicles; the same seed gives the same split.

        Returns
        -------
        train, test : TrackSet
            Disjoint in vehicles.
        """
        counted = isinstance(test_size, Integral) and not isinstance(test_size, bool)
        if not counted:
            fraction = check_positive(test_size, "test_size")
            if not fraction < 1.0:
                raise ValueError(f"test_size: expected a fraction between 0 and 1 or a number of vehicles, "
                                 f"got {test_size!r}")
        vehicles = sorted(set(self.vehicles))
        if len(vehicles) < 2:
            raise ValueError(f"test_size: a split needs at least two vehicles, the tracks hold {len(vehicles)}")
        if counted:
            n_test = check_int(test_size, "test_size", maximum=len(vehicles) - 1)
        else:
            n_test = min(max(1, int(round(fraction * len(vehicles)))), len(vehicles) - 1)
        test = set(check_rng(random_state).permutation(vehicles)[:n_test].tolist())
        return self.subset(v for v in vehicles if v not in test), self.subset(test)


def _seconds(values, name, path):
    """Report times as float seconds: numbers, or ISO 8601 date-times (UTC)."""
    # an empty cell is a report without a time (NaN, dropped and counted as no_time); it must not
    # turn a column of seconds into one of dates, as numpy reads "10" as the year 10
    try:
        return _numbers(values, name, path)
    except ValueError:
        pass
    # a cell NaN (or infinite) is a missing time, as in a column of seconds
    numbers = [_as_number(v) for v in values]
    given = ["" if x is not None and not np.isfinite(x) else v.strip() for v, x in zip(values, numbers)]
    try:
        stamps = _date_times(given)
    except ValueError:
        first = next((i for i, v in enumerate(given) if not _is_date_time(v)), 0)
        raise ValueError(f"{name}: expected numbers (seconds) or ISO 8601 date-times, got {values[first]!r} "
                         f"(report {first + 1})") from None
    # numpy reads a bare number as a year ("10" is the year 10): a column of seconds with one
    # date-time in it would be read as dates two thousand years before it
    number = next((i for i, (v, x) in enumerate(zip(given, numbers)) if v and x is not None), None)
    if number is not None:
        other = next(i for i, (v, x) in enumerate(zip(given, numbers)) if v and x is None)
        raise ValueError(f"{name}: expected numbers (seconds) or ISO 8601 date-times, not both: report {number + 1} "
                         f"is {values[number]!r}, report {other + 1} {values[other]!r}")
    seconds = np.full(len(stamps), np.nan)
    known = ~np.isnat(stamps)
    if np.any(known):
        seconds[known] = (stamps[known] - stamps[known].min()).astype(np.int64) / 1e9
    return seconds


def _date_times(values):
    """Date-time strings as UTC ``datetime64[ns]``; an empty string is a missing time (NaT)."""
    # numpy applies an offset (Z, +01:00), then warns that the result keeps none (numpy 2), or that
    # reading one is deprecated (numpy 1.x, a deprecation numpy 2 withdrew): UTC is what is wanted
    with (ignored(UserWarning, message="no explicit representation of timezones"),
          ignored(DeprecationWarning, message="parsing timezone aware datetimes is deprecated")):
        return np.array([v or "NaT" for v in values], dtype="datetime64[ns]")


def _is_date_time(value):
    """Whether numpy reads ``value`` as a date-time (an empty cell counts as one: a missing time)."""
    try:
        _date_times([value])
    except ValueError:
        return False
    return True


def _as_number(value):
    """``float(value)``, or None for a cell that is no number."""
    try:
        return float(value)
    except ValueError:
        return None


def _numbers(values, name, path):
    """A column of numbers, an empty cell read as missing (NaN)."""
    try:  # numpy's own conversion, for a column that holds numbers only
        out = np.array(values, dtype=np.float64)
    except ValueError:
        pass  # an empty cell, or a cell that is no number (named below)
    else:
        return out
    out = np.full(len(values), np.nan)
    for i, v in enumerate(values):
        if v.strip():
            try:
                out[i] = float(v)
            except ValueError:
                raise ValueError(f"path: {path} column {name!r}, report {i + 1}: expected a number, "
                                 f"got {v!r}") from None
    return out


def _read_columns(path, columns):
    try:
        # utf-8-sig: a spreadsheet's CSV export starts with a byte-order mark, which would be part of the first name
        with open(path, newline="", encoding="utf-8-sig") as handle:
            reader = csv.reader(handle)
            header = next(reader, [])
            missing = [c for c in columns if c not in header]
            if missing:
                # a file separated by another character reads as one column named by the whole header
                other = [sep for sep in ";\t|" if len(header) == 1 and sep in header[0]]
                hint = f"; its fields look separated by {other[0]!r}, and the loader reads commas" if other else ""
                raise ValueError(f"path: {path} has no column {missing[0]!r} (it has {', '.join(header)}){hint}")
            # a name that appears twice is read from its last column, as csv.DictReader reads it
            where = [len(header) - 1 - header[::-1].index(c) for c in columns]
            needed = max(where) + 1
            rows = []
            for row in reader:
                if not row:  # a blank line, which csv.DictReader skipped too
                    continue
                if len(row) < needed:
                    raise ValueError(f"path: {path} line {reader.line_num} has fewer fields than its header")
                rows.append([row[i] for i in where])
    except (UnicodeDecodeError, csv.Error) as exc:
        raise ValueError(f"path: {path} is not a UTF-8 CSV file ({exc})") from None
    if not rows:
        raise ValueError(f"path: {path} holds no reports")
    return [list(col) for col in zip(*rows)]


def _plausible(t, east, north, max_speed):
    """Indices of the reports kept when each must be reachable from the last kept one at ``max_speed``.

    The first kept is the first report from which one of the next two is reachable: a corrupt first
    fix would otherwise be the anchor every later report is measured from, and take them all with it.
    """
    def reachable(j, i):
        dt = t[i] - t[j]
        return dt > 0 and np.hypot(east[i] - east[j], north[i] - north[j]) <= max_speed * dt

    n = len(t)
    start = next((j for j in range(n - 1) if any(reachable(j, i) for i in range(j + 1, min(j + 3, n)))), 0)
    kept = [start]
    for i in range(start + 1, n):
        if reachable(kept[-1], i):
            kept.append(i)
    return np.array(kept)


def _spans(t, step, max_gap, min_length):
    """``(start, stop, rows)`` of each piece of one vehicle's time-sorted reports ``t`` that
    resamples to at least ``min_length`` rows."""
    cuts = np.flatnonzero(np.diff(t) > max_gap) + 1
    spans = []
    for start, stop in zip(np.r_[0, cuts], np.r_[cuts, len(t)]):
        rows = int(np.floor((t[stop - 1] - t[start]) / step + 1e-9)) + 1
        if rows >= max(min_length, 2):
            spans.append((start, stop, rows))
    return spans


def _resampled(t, east, north, step, span):
    """One piece ``(times, rows)``: the positions interpolated every ``step`` and their velocities."""
    start, stop, rows = span
    ts = t[start:stop]
    grid = ts[0] + step * np.arange(rows)
    pos = np.column_stack([np.interp(grid, ts, east[start:stop]), np.interp(grid, ts, north[start:stop])])
    return grid, np.hstack([pos, np.gradient(pos, step, axis=0)])


def _check_time_resolution(t, timed, name, step):
    """Refuse times that, counted from the first report, float seconds cannot tell apart at ``step``."""
    # counting from the first report rounds each time to the float spacing of the larger of the
    # two: a corrupt time far before the others, or epoch nanoseconds read as seconds, leaves
    # every report on a coarse grid (repeated times, steps of the wrong length, a silently wrong
    # track); a corrupt time far after the others rounds only itself, and max_gap cuts it off
    known = t[timed]
    first, typical = known.min(), np.median(known)
    resolution = np.spacing(max(abs(first), abs(typical)))
    if resolution <= 1e-3 * step:
        return
    if np.spacing(abs(typical)) > 1e-3 * step:
        raise ValueError(f"{name}: report times of about {typical:.4g} s are {resolution:.3g} s apart as float "
                         f"seconds, too coarse for step = {step:g} s: expected seconds (a column of nanoseconds "
                         f"divided by 1e9 first)")
    report = np.flatnonzero(timed)[np.argmin(known)]
    raise ValueError(f"{name}: report {report + 1} is at {first:.6g} s, so long before the others (their median is "
                     f"{typical:.6g} s) that times counted from it are {resolution:.3g} s apart, too coarse for "
                     f"step = {step:g} s: expected a corrupt time to be removed first")


def load_tracks_csv(path, time="time", vehicle="id", lat="lat", lon="lon", step=10.0, max_gap=60.0, min_length=10,
                    origin=None, bounds=None, max_speed=None, attribution=""):
    """Tracks from a CSV of position reports, one row per report.

    Parameters
    ----------
    path : str or path-like
        The CSV file (comma-separated, UTF-8), with a header row.
    time, vehicle, lat, lon : str
        The columns of the report time (seconds, or ISO 8601 date-times: in UTC, or with an offset
        such as ``Z`` or ``+01:00``, which is applied; not both in one column; an empty or NaN cell
        is a report without a time), the vehicle's
        identifier, and its latitude and longitude in degrees.
    step : float, default=10.0
        Seconds between resampled rows. A step that would resample the recording into more than
        ``MAX_RESAMPLED_ROWS`` (10⁸) rows is refused before any row is made.
    max_gap : float, default=60.0
        The longest time between two reports that is interpolated across; a longer gap ends a
        piece of track and a new one starts after it.
    min_length : int, default=10
        Pieces with fewer resampled rows are dropped.
    origin : (float, float), optional
        Latitude and longitude of the plane's origin; default the centre of the smallest box holding
        the reports (across the 180th meridian if that box is the smaller).
    bounds : (float, float, float, float), optional
        ``(lat_min, lat_max, lon_min, lon_max)``: reports outside are dropped. ``lon_min >
        lon_max`` is a box across the 180th meridian (from ``lon_min`` east to ``lon_max``).
    max_speed : float, optional
        Metres a second: a report farther from the vehicle's previous kept report than this speed
        allows is dropped as a corrupt fix. A vehicle's first kept report is its first from which
        one of the next two is reachable, so that a corrupt first fix is dropped rather than every
        report after it.
    attribution : str
        Kept on the result.

    Returns
    -------
    TrackSet
        The resampled tracks; ``dropped`` counts the reports dropped for each reason.
    """
    path = check_path(path)
    step = check_positive(step, "step")
    max_gap = check_positive(max_gap, "max_gap")
    if max_gap < step:
        raise ValueError(f"max_gap: expected at least step = {step}, got {max_gap}")
    min_length = check_int(min_length, "min_length", minimum=2)
    if max_speed is not None:
        max_speed = check_positive(max_speed, "max_speed")
    if bounds is not None:
        lat_min, lat_max, lon_min, lon_max = _degrees(bounds, "bounds", 4, "(lat_min, lat_max, lon_min, lon_max)")
        if not lat_min <= lat_max:
            raise ValueError(f"bounds: expected lat_min <= lat_max, got {bounds!r}")
    if origin is not None:
        origin = _origin(origin)
    times, ids, lats, lons = _read_columns(path, [time, vehicle, lat, lon])
    t = _seconds(times, time, path)
    timed = np.isfinite(t)
    if np.any(timed):
        _check_time_resolution(t, timed, time, step)
        t = t - t[timed].min()
    ids = np.array(ids)
    la, lo = _numbers(lats, lat, path), _numbers(lons, lon, path)
    keep = np.isfinite(la) & np.isfinite(lo) & (np.abs(la) < 90) & (np.abs(lo) <= 180)
    dropped = {"no_time": int(np.sum(keep & ~timed)), "no_position": int(np.sum(~keep))}
    keep &= timed
    if bounds is not None:
        in_lon = (lo >= lon_min) & (lo <= lon_max) if lon_min <= lon_max else (lo >= lon_min) | (lo <= lon_max)
        inside = (la >= lat_min) & (la <= lat_max) & in_lon
        dropped["outside_bounds"] = int(np.sum(keep & ~inside))
        keep &= inside
    if not np.any(keep):
        raise ValueError(f"path: {path} holds no report with a position (inside bounds)")
    t, ids, la, lo = t[keep], ids[keep], la[keep], lo[keep]
    origin = ((la.min() + la.max()) / 2, _central_longitude(lo)) if origin is None else origin
    east, north = project(la, lo, origin)
    kept = []
    dropped["implausible_speed"] = dropped["repeated_time"] = 0
    # every vehicle's reports in time order (a tie in the file's order) from one sort, not a pass
    # over all the reports a vehicle: a day of AIS holds thousands of vessels and millions of reports
    names, vehicle = np.unique(ids, return_inverse=True)
    order = np.lexsort((t, vehicle))
    starts = np.searchsorted(vehicle[order], np.arange(len(names) + 1))
    for v, name in enumerate(names.tolist()):
        mine = order[starts[v]:starts[v + 1]]
        first = np.r_[True, np.diff(t[mine]) > 0]  # one report per time: the first
        dropped["repeated_time"] += int(np.sum(~first))
        mine = mine[first]
        if max_speed is not None:
            plausible = _plausible(t[mine], east[mine], north[mine], max_speed)
            dropped["implausible_speed"] += len(mine) - len(plausible)
            mine = mine[plausible]
        kept.append((name, mine, _spans(t[mine], step, max_gap, min_length)))
    total = sum(rows for _, _, spans in kept for _, _, rows in spans)
    if total == 0:
        intervals = np.concatenate([np.diff(t[mine]) for _, mine, _ in kept])
        spacing = np.median(intervals) if intervals.size else 0.0
        hint = ""
        if spacing > max_gap:
            # a time column in milliseconds or nanoseconds, read as seconds, makes every gap too long
            hint = (f"; the median time between a vehicle's consecutive reports is {spacing:.4g} s, "
                    f"longer than max_gap: if the {time!r} column counts milliseconds (or nanoseconds), divide it by "
                    f"1000 (or 1e9) first, or raise max_gap")
        raise ValueError(f"min_length: no piece of track in {path} has {min_length} rows at step {step} s with gaps "
                         f"of at most max_gap = {max_gap} s{hint}")
    if total > MAX_RESAMPLED_ROWS:
        # counted before any row is made: a step far below the reports' spacing would otherwise
        # interpolate until memory runs out
        raise ValueError(f"step: resampling {path} every {step:g} s makes {total:.3g} rows, more than "
                         f"{MAX_RESAMPLED_ROWS:.0e}; expected a step nearer the reports' spacing")
    tracks, track_times, vehicles = [], [], []
    for name, mine, spans in kept:
        for span in spans:
            grid, rows = _resampled(t[mine], east[mine], north[mine], step, span)
            tracks.append(rows)
            track_times.append(grid)
            vehicles.append(name)
    return TrackSet(tracks, track_times, vehicles, step, tuple(float(v) for v in origin), attribution, dropped)


def _shipped(name):
    return resources.files(__package__).joinpath("data", name)


_STONE_SOUP = ("redistributed in the Stone Soup repository (Defence Science and Technology Laboratory UK, MIT "
               "licence); see kbfilter/datasets/data/ATTRIBUTION.md")


def load_opensky(step=10.0, max_gap=30.0, min_length=10, origin=None):
    """ADS-B tracks of 84 aircraft over the United Kingdom (The OpenSky Network, 12 July 2021).

    Reports every 10 s over 20 minutes; with the default ``max_gap`` a single missed report is
    interpolated across and a longer gap starts a new piece. Reports implying more than 350 m/s
    are dropped. Attribution: ``kbfilter/datasets/data/ATTRIBUTION.md`` (cite Schäfer et al.
    (2014) when you publish on it).

    Parameters
    ----------
    step, max_gap, min_length, origin
        As :func:`load_tracks_csv` takes them.

    Returns
    -------
    TrackSet
        At the defaults, 87 pieces of track of 81 aircraft, 10 to 120 steps of 10 s each, in metres
        about the centre of the recording.
    """
    with resources.as_file(_shipped("OpenSky_Plane_States.csv")) as path:
        return load_tracks_csv(path, time="time", vehicle="icao24", lat="lat", lon="lon", step=step,
                               max_gap=max_gap, min_length=min_length, origin=origin, max_speed=350.0,
                               attribution="The OpenSky Network (opensky-network.org), " + _STONE_SOUP)


def load_solent(step=10.0, max_gap=60.0, min_length=10, origin=None):
    """AIS tracks of the ships in the Solent, south coast of England (12 January 2016, 84 minutes).

    Reports come at irregular times (every few seconds for a ship under way, minutes for one at
    anchor); positions are interpolated linearly between reports at most ``max_gap`` apart.
    Reports outside the Solent's box (latitude 50.5-51.0, longitude -1.7 to -0.8) and reports
    implying more than 25 m/s (about 49 knots) are dropped as corrupt fixes. Attribution:
    ``kbfilter/datasets/data/ATTRIBUTION.md``.

    Parameters
    ----------
    step, max_gap, min_length, origin
        As :func:`load_tracks_csv` takes them.

    Returns
    -------
    TrackSet
        At the defaults, 77 pieces of track of 45 ships, under way and at anchor, in metres about
        the centre of the Solent's reports.
    """
    with resources.as_file(_shipped("SolentAIS_20160112_130211.csv")) as path:
        return load_tracks_csv(path, time="Time", vehicle="MMSI", lat="Latitude_degrees", lon="Longitude_degrees",
                               step=step, max_gap=max_gap, min_length=min_length, origin=origin,
                               bounds=(50.5, 51.0, -1.7, -0.8), max_speed=25.0, attribution="AIS, " + _STONE_SOUP)
