"""The recorded tracks: projection, resampling across gaps, splits by vehicle, the shipped recordings."""

import io
import warnings

import numpy as np
import pytest

from kbfilter.datasets import EARTH_RADIUS, load_opensky, load_solent, load_tracks_csv, project, unproject


def _haversine(lat1, lon1, lat2, lon2):
    p1, p2, dl = np.radians(lat1), np.radians(lat2), np.radians(lon2 - lon1)
    a = np.sin((p2 - p1) / 2) ** 2 + np.cos(p1) * np.cos(p2) * np.sin(dl / 2) ** 2
    return 2 * EARTH_RADIUS * np.arcsin(np.sqrt(a))


def test_the_projection_round_trips_to_a_metre_and_keeps_great_circle_distances_from_the_origin():
    rng = np.random.default_rng(0)
    origin = (52.25, -1.70)
    lat = origin[0] + rng.uniform(-4, 4, 500)
    lon = origin[1] + rng.uniform(-6, 6, 500)
    east, north = project(lat, lon, origin)
    back_lat, back_lon = unproject(east, north, origin)
    error_m = _haversine(lat, lon, back_lat, back_lon)
    assert error_m.max() < 1.0
    np.testing.assert_allclose(np.hypot(east, north), _haversine(origin[0], origin[1], lat, lon), rtol=1e-9)
    # east is east and north is north; the origin maps to 0 exactly
    e, n = project([origin[0], origin[0] + 0.1, origin[0]], [origin[1], origin[1], origin[1] + 0.1], origin)
    assert e[0] == 0.0 and n[0] == 0.0 and n[1] > 0 and abs(e[1]) < 1e-6 and e[2] > 0
    # London to Paris, a distance everyone can check: 343.5 km on this sphere
    e, n = project([48.8566], [2.3522], (51.5074, -0.1278))
    assert abs(np.hypot(e, n)[0] - _haversine(51.5074, -0.1278, 48.8566, 2.3522)) < 1e-3
    with pytest.raises(ValueError, match="origin"):
        project([0.0], [0.0], (95.0, 0.0))
    # positions the projection cannot map are refused by name, where NaN went through and a
    # latitude of 100 or a position past the antipode came back as some other place
    for bad, expected in [(([np.nan], [0.0]), "lat, lon: expected finite"), (([100.0], [0.0]), "lat: expected"),
                          (([1.0, 2.0], [0.0]), "lat, lon: expected arrays of the same shape"),
                          ((["a"], [0.0]), "lat, lon: expected arrays of numbers")]:
        with pytest.raises(ValueError, match=expected):
            project(*bad, origin)
    antipode = np.pi * EARTH_RADIUS
    assert abs(unproject([0.0], [antipode], (0.0, 0.0))[0][0]) < 1e-9     # the far end of the plane: the antipode
    for bad, expected in [(([1e300], [0.0]), "east, north: expected positions within"),
                          (([1.01 * antipode], [0.0]), "east, north: expected positions within"),
                          (([np.inf], [0.0]), "east, north: expected finite")]:
        with pytest.raises(ValueError, match=expected):
            unproject(*bad, origin)


def _write(path, rows):
    path.write_text("t,id,lat,lon\n" + "\n".join(",".join(str(v) for v in row) for row in rows) + "\n")
    return path


def test_resampling_interpolates_between_reports_and_never_across_a_long_gap(tmp_path):
    # one vehicle going north at 10 m/s, reports every 7 s, with a 100 s silence in the middle
    origin = (50.0, 0.0)
    times = np.r_[np.arange(0, 200, 7.0), np.arange(300, 500, 7.0)]
    north_m = 10.0 * times
    lat, lon = unproject(np.zeros_like(north_m), north_m, origin)
    path = _write(tmp_path / "log.csv", [(t, "a", la, lo) for t, la, lo in zip(times, lat, lon)])
    tracks = load_tracks_csv(path, time="t", step=5.0, max_gap=60.0, min_length=5, origin=origin)
    assert len(tracks) == 2 and tracks.vehicles == ["a", "a"]
    for piece_times, piece in zip(tracks.times, tracks.tracks):
        assert np.all(np.diff(piece_times) == 5.0)
        inside = (piece_times >= 200) & (piece_times < 300)
        assert not inside.any()  # nothing invented in the silence
        np.testing.assert_allclose(piece[:, 1], 10.0 * piece_times, atol=1e-6)   # north, interpolated
        np.testing.assert_allclose(piece[:, 3], 10.0, atol=1e-6)                   # north velocity
        np.testing.assert_allclose(piece[:, [0, 2]], 0.0, atol=1e-6)
    # a longer max_gap joins the pieces and interpolates across
    joined = load_tracks_csv(path, time="t", step=5.0, max_gap=120.0, min_length=5, origin=origin)
    assert len(joined) == 1


def test_loading_drops_corrupt_fixes_and_says_how_many(tmp_path):
    origin = (50.0, 0.0)
    times = np.arange(0, 300, 10.0)
    lat, lon = unproject(np.zeros_like(times), 5.0 * times, origin)
    rows = [(t, "b", la, lo) for t, la, lo in zip(times, lat, lon)]
    rows[10] = (rows[10][0], "b", 51.0, 0.0)      # a jump of about 100 km in 10 s
    rows.append((5.0, "b", "", ""))                # no position
    rows.append((20.0, "b", lat[2], lon[2]))      # the same time twice
    path = _write(tmp_path / "log.csv", rows)
    tracks = load_tracks_csv(path, time="t", step=10.0, max_gap=30.0, origin=origin, max_speed=50.0)
    assert tracks.dropped == {"no_time": 0, "no_position": 1, "implausible_speed": 1, "repeated_time": 1}
    np.testing.assert_allclose(tracks.tracks[0][:, 1], 5.0 * tracks.times[0], atol=1e-6)
    with pytest.raises(ValueError, match="no column 'time'"):
        load_tracks_csv(path)
    with pytest.raises(ValueError, match="max_gap: expected at least step"):
        load_tracks_csv(path, time="t", step=10.0, max_gap=5.0)
    with pytest.raises(ValueError, match="min_length: no piece of track"):
        load_tracks_csv(path, time="t", step=10.0, max_gap=30.0, min_length=1000)


def test_a_time_column_in_milliseconds_is_named_when_no_track_survives(tmp_path):
    """Epoch milliseconds read as seconds make every gap between reports longer than max_gap, and
    the loader said only that no piece of track had enough rows."""
    origin = (50.0, -1.0)
    times = np.arange(0, 300, 10.0)
    lat, lon = unproject(np.zeros_like(times), 5.0 * times, origin)
    rows = [(1.7e12 + 1000 * t, "b", la, lo) for t, la, lo in zip(times, lat, lon)]
    with pytest.raises(ValueError, match=r"median time between a vehicle's consecutive reports is 1e\+04 s, longer "
                                         r"than max_gap: if the 't' column counts milliseconds"):
        load_tracks_csv(_write(tmp_path / "ms.csv", rows), time="t", step=10.0, max_gap=30.0)
    rows = [(1.7e9 + t, "b", la, lo) for t, la, lo in zip(times, lat, lon)]
    assert len(load_tracks_csv(_write(tmp_path / "s.csv", rows), time="t", step=10.0, max_gap=30.0).tracks) == 1


def test_times_float_seconds_cannot_tell_apart_are_refused(tmp_path):
    """Times are counted from the first report: one corrupt time long before the others rounded
    every time after it to a coarse float grid, and the loader then cut or bent the track."""
    origin = (50.0, -1.0)
    times = np.arange(0, 300, 10.0)
    lat, lon = unproject(np.zeros_like(times), 5.0 * times, origin)
    rows = [(t, "b", la, lo) for t, la, lo in zip(times, lat, lon)]
    early = _write(tmp_path / "early.csv", [(-1e17, "b", lat[0], lon[0])] + rows)
    with pytest.raises(ValueError, match=r"t: report 1 is at -1e\+17 s, so long before the others .* 16 s apart, "
                                         r"too coarse for step = 10 s: expected a corrupt time to be removed"):
        load_tracks_csv(early, time="t", step=10.0, max_gap=30.0, origin=origin)
    # one long after the others rounds only itself, and max_gap cuts it off the track
    late = load_tracks_csv(_write(tmp_path / "late.csv", rows + [(1e20, "b", lat[-1], lon[-1])]), time="t",
                           step=10.0, max_gap=30.0, origin=origin)
    assert len(late) == 1
    np.testing.assert_allclose(late.times[0], times)
    np.testing.assert_allclose(late.tracks[0][:, 1], 5.0 * times, atol=1e-6)
    nanoseconds = [(1.7e18 + 1e9 * t, "b", la, lo) for t, _, la, lo in rows]
    with pytest.raises(ValueError, match=r"t: report times of about 1\.7e\+18 s are 256 s apart .* \(a column of "
                                         r"nanoseconds divided by 1e9 first\)"):
        load_tracks_csv(_write(tmp_path / "ns.csv", nanoseconds), time="t", step=10.0, max_gap=30.0)


@pytest.mark.parametrize("corrupt", [[0], [1], [0, 1]])
def test_a_corrupt_fix_at_the_start_is_dropped_not_the_track_after_it(tmp_path, corrupt):
    # every later report was measured from the first one, so a corrupt first fix dropped them all
    origin = (50.0, 0.0)
    times = np.arange(0, 300, 10.0)
    lat, lon = unproject(np.zeros_like(times), 5.0 * times, origin)
    rows = [(t, "b", la, lo) for t, la, lo in zip(times, lat, lon)]
    for i in corrupt:
        rows[i] = (rows[i][0], "b", 51.0 + 0.1 * i, 0.0)   # about 100 km off
    tracks = load_tracks_csv(_write(tmp_path / "log.csv", rows), time="t", step=10.0, max_gap=30.0,
                             origin=origin, max_speed=50.0)
    assert tracks.dropped["implausible_speed"] == len(corrupt)
    assert len(tracks) == 1
    # a corrupt second fix is passed over as one in the middle is; a corrupt first one starts the track later
    first = 0 if corrupt == [1] else max(corrupt) + 1
    np.testing.assert_allclose(tracks.times[0], times[first:])
    np.testing.assert_allclose(tracks.tracks[0][:, 1], 5.0 * times[first:], atol=1e-6)


@pytest.mark.parametrize("stamp", [str, lambda t: f"2016-01-12T13:{int(t) // 60:02d}:{int(t) % 60:02d}"])
def test_a_report_without_a_time_is_dropped_and_counted_not_the_file(tmp_path, stamp):
    # one empty time made numpy read the column of seconds as dates ("10" as the year 10), or the
    # minimum NaN, and no track was left
    origin = (50.0, 0.0)
    times = np.arange(0, 300, 10.0)
    lat, lon = unproject(np.zeros_like(times), 5.0 * times, origin)
    rows = [("" if i == 7 else stamp(t), "d", la, lo) for i, (t, la, lo) in enumerate(zip(times, lat, lon))]
    tracks = load_tracks_csv(_write(tmp_path / "log.csv", rows), time="t", step=10.0, max_gap=30.0, origin=origin)
    assert tracks.dropped["no_time"] == 1 and tracks.dropped["no_position"] == 0
    assert len(tracks) == 1
    np.testing.assert_allclose(tracks.tracks[0][:, 1], 5.0 * tracks.times[0], atol=1e-6)


def test_a_spreadsheets_csv_reads_and_a_cell_that_is_no_number_is_named(tmp_path):
    origin = (50.0, 0.0)
    times = np.arange(0, 300, 10.0)
    lat, lon = unproject(np.zeros_like(times), 5.0 * times, origin)
    path = _write(tmp_path / "log.csv", [(t, "e", la, lo) for t, la, lo in zip(times, lat, lon)])
    exported = tmp_path / "exported.csv"   # a spreadsheet's UTF-8 export starts with a byte-order mark
    exported.write_text(path.read_text(), encoding="utf-8-sig")
    plain, marked = (load_tracks_csv(p, time="t", step=10.0, origin=origin) for p in (path, exported))
    np.testing.assert_array_equal(marked.tracks[0], plain.tracks[0])
    text = path.read_text().splitlines()
    text[4] = text[4].replace(text[4].split(",")[2], "N/A")
    path.write_text("\n".join(text) + "\n")
    with pytest.raises(ValueError, match=r"column 'lat', report 4: expected a number, got 'N/A'"):
        load_tracks_csv(path, time="t")
    # a time that is neither seconds nor a date-time is named with its report (the message showed the first time)
    rows = [(f"2016-01-12T13:00:{s:02d}", "e", lat[0], lon[0]) for s in range(0, 50, 10)]
    rows.append(("noon", "e", lat[0], lon[0]))
    with pytest.raises(ValueError, match=r"t: expected numbers \(seconds\) or ISO 8601 date-times, got 'noon' "
                                         r"\(report 6\)"):
        load_tracks_csv(_write(tmp_path / "times.csv", rows), time="t")


def test_a_column_of_seconds_with_a_date_time_in_it_is_refused_not_read_as_years(tmp_path):
    # numpy reads "10" as the year 10: the seconds had become dates two thousand years before the one
    rows = [(t, "e", 50.0 + 1e-4 * t, 0.0) for t in range(0, 400, 10)]
    rows[2] = ("2020-01-01T00:00:20Z", *rows[2][1:])
    with pytest.raises(ValueError, match=r"^t: expected numbers \(seconds\) or ISO 8601 date-times, not both: report 1 "
                                         r"is '0', report 3 '2020-01-01T00:00:20Z'$"):
        load_tracks_csv(_write(tmp_path / "mixed.csv", rows), time="t")
    # NaN in a column of date-times is a missing time, as it is in a column of seconds
    rows = [(f"2016-01-12T13:{s // 60:02d}:{s % 60:02d}", "e", 50.0 + 1e-6 * s, 0.0) for s in range(0, 400, 10)]
    rows[5] = ("NaN", *rows[5][1:])
    tracks = load_tracks_csv(_write(tmp_path / "dates.csv", rows), time="t", min_length=3)
    assert tracks.dropped["no_time"] == 1 and tracks.times[0][-1] == 390.0


def test_a_file_separated_by_semicolons_is_named_as_such(tmp_path):
    path = tmp_path / "semi.csv"
    path.write_text("time;id;lat;lon\n0;a;50.0;0.0\n")
    with pytest.raises(ValueError, match=r"semi.csv has no column 'time' \(it has time;id;lat;lon\); its fields look "
                                         r"separated by ';', and the loader reads commas$"):
        load_tracks_csv(path)


def test_arguments_the_loader_cannot_use_are_refused_by_name(tmp_path):
    origin = (50.0, 0.0)
    times = np.arange(0, 300, 10.0)
    lat, lon = unproject(np.zeros_like(times), 5.0 * times, origin)
    path = _write(tmp_path / "log.csv", [(t, "c", la, lo) for t, la, lo in zip(times, lat, lon)])
    # each message is a regular expression
    for kwargs, expected in [(dict(origin="abc"), r"origin: expected \(latitude, longitude\)"),
                             (dict(origin=(50.0, 0.0, 1.0)), r"origin: expected \(latitude, longitude\)"),
                             (dict(bounds=(49.0, 51.0, -1.0)), r"bounds: expected \(lat_min"),
                             (dict(bounds=(51.0, 49.0, -1.0, 1.0)), "bounds: expected lat_min <= lat_max"),
                             (dict(max_speed=-1.0), "max_speed: expected a positive"),
                             # a step far below the reports' spacing: refused before a row is made, where
                             # it interpolated until memory ran out
                             (dict(step=1e-9, max_gap=30.0), r"step: resampling .* every 1e-09 s makes 2.9e\+11 rows")]:
        with pytest.raises(ValueError, match=expected):
            load_tracks_csv(path, time="t", **kwargs)


def test_a_path_that_is_not_a_file_name_is_refused_before_anything_is_read(monkeypatch):
    # 0 would be taken by open() as standard input, read, and closed with the loader's file
    monkeypatch.setattr("sys.stdin", io.StringIO("time,id,lat,lon\n"))
    for path, got in [(0, "int"), (None, "NoneType"), (io.StringIO("time,id,lat,lon\n"), "StringIO")]:
        with pytest.raises(ValueError, match=f"path: expected a file name \\(a str or path-like\\), got {got}"):
            load_tracks_csv(path)
    with pytest.raises(ValueError, match="path: expected a file name, got an empty one"):
        load_tracks_csv("")


def test_a_damaged_csv_is_a_value_error_naming_the_file_and_line(tmp_path):
    short = tmp_path / "short.csv"
    short.write_text("time,id,lat,lon\n0,a,50.0,0.0\n10,a\n")
    with pytest.raises(ValueError, match=r"short.csv line 3 has fewer fields than its header"):
        load_tracks_csv(short)
    latin = tmp_path / "latin.csv"
    latin.write_bytes(b"time,id,lat,lon\n0,\xe9t\xe9,50.0,0.0\n")
    with pytest.raises(ValueError, match=r"latin.csv is not a UTF-8 CSV file"):
        load_tracks_csv(latin)


def test_iso_times_are_read_as_seconds(tmp_path):
    path = tmp_path / "ais.csv"
    path.write_text("t,id,lat,lon\n2016-01-12 13:00:00.000,s,50.0,0.0\n2016-01-12 13:00:30.500,s,50.001,0.0\n"
                    "2016-01-12 13:01:00.000,s,50.002,0.0\n")
    tracks = load_tracks_csv(path, time="t", step=10.0, max_gap=60.0, min_length=3)
    np.testing.assert_array_equal(tracks.times[0], [0.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0])


def test_an_offset_on_a_time_is_applied_and_needs_no_warning(tmp_path):
    # numpy applies "Z" or "+01:00" and warns that it keeps no zone: the loader reads them as UTC, silently
    rows = {"utc": ["2016-01-12 13:00:00", "2016-01-12 13:00:30", "2016-01-12 13:01:00"],
            "zoned": ["2016-01-12T13:00:00Z", "2016-01-12T14:00:30+01:00", "2016-01-12T08:01:00-05:00"]}
    loaded = {}
    for name, stamps in rows.items():
        path = tmp_path / f"{name}.csv"
        path.write_text("t,id,lat,lon\n" + "".join(f"{t},s,{50.0 + 0.001 * i},0.0\n" for i, t in enumerate(stamps)))
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            loaded[name] = load_tracks_csv(path, time="t", step=10.0, max_gap=60.0, min_length=3)
    np.testing.assert_array_equal(loaded["zoned"].times[0], loaded["utc"].times[0])
    np.testing.assert_array_equal(loaded["zoned"].tracks[0], loaded["utc"].tracks[0])


def test_a_recording_across_the_180th_meridian_is_projected_about_its_own_centre(tmp_path):
    # a ship going east across longitude 180 at 20 m/s: the box of its longitudes was -180..180, so the
    # plane's origin fell on the far side of the Earth and the track came out distorted several times over
    origin = (-17.0, 180.0)
    times = np.arange(0, 300, 10.0)
    lat, lon = unproject(20.0 * times - 3000.0, np.zeros_like(times), origin)
    assert lon.min() < -179.9 and lon.max() > 179.9
    path = _write(tmp_path / "fiji.csv", [(t, "f", la, lo) for t, la, lo in zip(times, lat, lon)])
    tracks = load_tracks_csv(path, time="t", step=10.0)
    assert abs(tracks.origin[0] - lat.mean()) < 1e-3 and abs(abs(tracks.origin[1]) - 180.0) < 1e-3
    np.testing.assert_allclose(tracks.tracks[0][:, 2], 20.0, rtol=1e-3)  # east velocity
    np.testing.assert_allclose(tracks.tracks[0][:, 3], 0.0, atol=0.1)
    # bounds across the meridian: from lon_min east to lon_max
    lat_box = (lat.min() - 1, lat.max() + 1)
    across = load_tracks_csv(path, time="t", step=10.0, bounds=(*lat_box, 179.95, -179.99))
    kept = np.sum((lon >= 179.95) | (lon <= -179.99))
    assert 0 < kept < len(lon) and across.dropped["outside_bounds"] == len(lon) - kept
    # a recording that does not cross it keeps the centre of its box
    plain = load_tracks_csv(_write(tmp_path / "plain.csv", [(t, "f", la, lo - 180.5)
                                                           for t, la, lo in zip(times, lat, lon % 360)]),
                            time="t", step=10.0)
    assert abs(plain.origin[1] - ((lon % 360).min() + (lon % 360).max() - 361.0) / 2) < 1e-9


def test_many_vehicles_interleaved_load_as_each_vehicle_alone(tmp_path):
    # vehicles are grouped by one sort (a pass over the whole file for each vehicle took 43 s on a
    # million reports of 2,000 vehicles): each one's tracks are those of its reports in a file of their own
    rng = np.random.default_rng(3)
    origin, rows = (50.0, -1.0), []
    for v in range(40):
        times = np.sort(rng.choice(np.arange(0.0, 900.0, 5.0), size=120, replace=False))
        times = np.r_[times, times[::17]]                         # repeated times: the first report is kept
        east, north = 8.0 * times + 500.0 * v, rng.normal(0.0, 30.0, times.size)
        lat, lon = unproject(east, north, origin)
        rows += [(t, f"v{v:02d}", la, lo) for t, la, lo in zip(times, lat, lon)]
    rows = [rows[j] for j in rng.permutation(len(rows))]
    together = tmp_path / "all.csv"   # with a column before and after, and blank lines
    together.write_text("extra,t,id,lat,lon,note\n" + "".join(f"x,{t},{v},{la},{lo},y\n" + "\n" * (i % 50 == 0)
                                                             for i, (t, v, la, lo) in enumerate(rows)))
    kwargs = dict(time="t", step=10.0, max_gap=60.0, min_length=3, origin=origin)
    loaded = load_tracks_csv(together, **kwargs)
    assert len(set(loaded.vehicles)) == 40 and loaded.dropped["repeated_time"] == 40 * len(range(0, 120, 17))
    for v in sorted(set(loaded.vehicles)):
        alone = load_tracks_csv(_write(tmp_path / f"{v}.csv", [r for r in rows if r[1] == v]), **kwargs)
        mine = [i for i, name in enumerate(loaded.vehicles) if name == v]
        assert len(mine) == len(alone) > 0
        for i, j in zip(mine, range(len(alone))):
            np.testing.assert_array_equal(loaded.tracks[i], alone.tracks[j])
            # times count from the recording's first report, which differs
            np.testing.assert_array_equal(loaded.times[i] - loaded.times[i][0], alone.times[j] - alone.times[j][0])


def test_the_split_is_by_vehicle_and_reproducible():
    tracks = load_solent()
    train, test = tracks.split(test_size=0.3, random_state=4)
    assert set(train.vehicles).isdisjoint(test.vehicles)
    assert set(train.vehicles) | set(test.vehicles) == set(tracks.vehicles)
    assert len(train) + len(test) == len(tracks)
    again = tracks.split(test_size=0.3, random_state=4)[1]
    assert again.vehicles == test.vehicles
    with pytest.raises(ValueError, match=r"vehicles: \['nosuch'\] are not in this recording"):
        tracks.subset(["nosuch"])
    with pytest.raises(ValueError, match="vehicles: expected a list of identifiers, got the string"):
        tracks.subset(tracks.vehicles[0])
    with pytest.raises(ValueError, match="vehicles: expected at least one identifier, got none"):
        tracks.subset([])
    with pytest.raises(ValueError, match=r"vehicles: \[1, 'nosuch'\] are not in this recording"):
        tracks.subset([1, "nosuch"])
    with pytest.raises(ValueError, match="test_size"):
        tracks.split(test_size=1.5)
    # an integer counts vehicles, as scikit-learn's train_test_split reads it
    for count in (1, 5, np.int64(len(set(tracks.vehicles)) - 1)):
        assert len(set(tracks.split(test_size=count, random_state=0)[1].vehicles)) == count
    with pytest.raises(ValueError, match=rf"^test_size: expected an integer <= {len(set(tracks.vehicles)) - 1}, got"):
        tracks.split(test_size=len(set(tracks.vehicles)))
    with pytest.raises(ValueError, match=r"^test_size: expected an integer >= 1, got 0$"):
        tracks.split(test_size=0)


@pytest.mark.parametrize("loader", [load_opensky, load_solent])
def test_the_shipped_recordings_load_as_sequences_ready_for_fit(loader):
    tracks = loader()
    assert len(tracks) > 40 and "Stone Soup" in tracks.attribution
    for track, times in zip(tracks.tracks, tracks.times):
        assert track.shape[1] == 4 and len(track) == len(times) >= 10 and np.all(np.isfinite(track))
        np.testing.assert_allclose(np.diff(times), tracks.step)
        # velocities are the central differences of the positions
        np.testing.assert_allclose(track[1:-1, 2:], (track[2:, :2] - track[:-2, :2]) / (2 * tracks.step), atol=1e-6)
    speeds = np.concatenate([np.hypot(*t[:, 2:].T) for t in tracks.tracks])
    assert speeds.max() < (350.0 if loader is load_opensky else 25.0)


def test_a_log_is_cut_at_its_gaps_into_the_pieces_fit_takes():
    import kbfilter as kb
    from kbfilter.datasets import cut_at_gaps

    states, obs = kb.systems.Rotation().simulate(40, rng=0)
    controls = np.random.default_rng(0).normal(size=(40, 1))
    states[5, 1], obs[12, 0], controls[30, 0] = np.nan, np.inf, np.nan
    xs, zs, us = cut_at_gaps(states, obs, controls)
    pieces = [(0, 5), (6, 12), (13, 30), (31, 40)]
    assert [len(x) for x in xs] == [b - a for a, b in pieces]
    for x, z, u, (a, b) in zip(xs, zs, us, pieces):
        assert np.array_equal(x, states[a:b]) and np.array_equal(z, obs[a:b]) and np.array_equal(u, controls[a:b])
    # without controls their gap is none, and the pieces are what fit takes as several sequences
    xs, zs = cut_at_gaps(states, obs)
    assert [len(x) for x in xs] == [5, 6, 27]
    by_hand = kb.KernelBayesFilter().fit([states[:5], states[6:12], states[13:]], [obs[:5], obs[6:12], obs[13:]])
    cut = kb.KernelBayesFilter().fit(xs, zs)
    np.testing.assert_array_equal(cut.batch_filter(obs[:5])[0], by_hand.batch_filter(obs[:5])[0])
    # a step between two gaps makes no transition: it is left out, and said so
    states[7, 0] = np.nan
    with pytest.warns(UserWarning, match=r"left out 1 step\(s\) in 1 piece\(s\) shorter than min_length = 2"):
        xs, zs = cut_at_gaps(states, obs)
    assert [len(x) for x in xs] == [5, 4, 27]
    # images keep their shape
    frames = np.random.default_rng(1).random((10, 3, 4))
    frames[4, 2, 1] = np.nan
    _, zs = cut_at_gaps(np.zeros((10, 2)), frames)
    assert [z.shape for z in zs] == [(4, 3, 4), (5, 3, 4)]
    with pytest.raises(ValueError, match=r"^states and observations: expected a run of at least min_length = 2 "
                                         r"steps without a NaN or an infinity, got 3 run\(s\), the longest of 1$"):
        cut_at_gaps(np.zeros((6, 2)) * [[np.nan], [1], [np.nan], [1], [np.nan], [1]], obs[:6])
    with pytest.raises(ValueError, match="^min_length: expected an integer >= 2, got 1$"):
        cut_at_gaps(states, obs, min_length=1)
    with pytest.raises(ValueError, match="^states and controls: expected the same number of samples, got 40 and 39$"):
        cut_at_gaps(states, obs, controls[:39])
    # several runs, as fit takes them, are each cut; their pieces follow one another
    with pytest.warns(UserWarning, match=r"left out 1 step\(s\) in 1 piece\(s\)"):
        xs, zs, us = cut_at_gaps([states[:20], states[20:]], [obs[:20], obs[20:]], [controls[:20], controls[20:]])
    assert [(len(x), len(z), len(u)) for x, z, u in zip(xs, zs, us)] == [(5, 5, 5), (4, 4, 4), (7, 7, 7),
                                                                          (10, 10, 10), (9, 9, 9)]
    assert np.array_equal(xs[3], states[20:30]) and np.array_equal(us[4], controls[31:])
    with pytest.raises(ValueError, match=r"^states\[1\] and observations\[1\]: expected the same number of samples"):
        cut_at_gaps([states[:20], states[20:]], [obs[:20], obs[20:39]])
    with pytest.raises(ValueError, match="^states and observations: expected both one sequence or both lists of 2 "
                                         "sequences, got ndarray$"):
        cut_at_gaps([states[:20], states[20:]], obs)
