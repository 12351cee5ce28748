"""What loading a recording of position reports costs as it grows: reports and vehicles.

A synthetic recording (one CSV: time, vehicle, latitude, longitude; vehicles reporting at random
times over a day, interleaved as a receiver logs them) is written for each size and loaded with
:func:`kbfilter.datasets.load_tracks_csv`. The loader reads the file once and groups the reports
by vehicle with one sort, so its time should grow with the number of reports and barely with the
number of vehicles: the script prints seconds, microseconds a report, and the ratio of each row's
time a report to the first row's.

Usage:  python benchmarks/load_tracks.py [--reports 100000 1000000] [--vehicles 100 2000] [--repeats 3]
"""

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from kbfilter.datasets import load_tracks_csv, unproject


def write_recording(path, n_reports, n_vehicles, rng):
    """A day of reports from ``n_vehicles`` vehicles moving at 10 m/s on straight lines."""
    vehicle = rng.integers(0, n_vehicles, n_reports)
    t = np.sort(rng.uniform(0.0, 86_400.0, n_reports))
    heading = rng.uniform(0.0, 2 * np.pi, n_vehicles)[vehicle]
    start = rng.normal(0.0, 20_000.0, (n_vehicles, 2))[vehicle]
    east, north = start[:, 0] + 10.0 * t * np.cos(heading), start[:, 1] + 10.0 * t * np.sin(heading)
    lat, lon = unproject(east, north, (50.0, -1.0))
    with open(path, "w") as handle:
        handle.write("time,id,lat,lon\n")
        handle.writelines(f"{a:.1f},v{b},{c:.6f},{d:.6f}\n" for a, b, c, d in zip(t, vehicle, lat, lon))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reports", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--vehicles", type=int, nargs="+", default=[100, 2_000])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    print(f"load_tracks_csv, step 60 s, max_gap 600 s, median of {args.repeats}")
    print(f"{'reports':>9} {'vehicles':>9} {'tracks':>7} {'seconds':>8} {'us/report':>10} {'ratio':>6}")
    first = None
    with tempfile.TemporaryDirectory() as folder:
        for n in args.reports:
            for v in args.vehicles:
                path = Path(folder) / f"{n}-{v}.csv"
                write_recording(path, n, v, rng)
                times = []
                for _ in range(args.repeats):
                    start = time.perf_counter()
                    tracks = load_tracks_csv(path, step=60.0, max_gap=600.0)
                    times.append(time.perf_counter() - start)
                seconds = statistics.median(times)
                per_report = 1e6 * seconds / n
                first = first or per_report
                print(f"{n:>9} {v:>9} {len(tracks):>7} {seconds:8.2f} {per_report:10.2f} {per_report / first:6.2f}")


if __name__ == "__main__":
    main()
