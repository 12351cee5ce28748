"""Learned motion on recorded tracks against the models a tracking engineer writes.

The benchmark of ``kbfilter bench solent`` / ``kbfilter bench opensky`` (described in
:mod:`kbfilter.bench.tracks`) with the recording as an option; results go to
``results/real_tracks/DATA-SENSOR`` unless ``--out`` says otherwise.

Usage:  python scenarios/real_tracks.py [--data solent|opensky] [--sensor fixes|radar] [--splits 10]
        [--methods cv ct imm learned] [--noise 10] [--gap 10] [--jobs 2] [--out FOLDER]
"""

import sys

from kbfilter.cli import tracks_scenario_main

if __name__ == "__main__":
    sys.exit(tracks_scenario_main())
