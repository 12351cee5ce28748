"""Recorded data shipped with kbfilter: real aircraft and ship tracks, a loader for your own, and
the pieces of a log between its gaps."""

from .logs import cut_at_gaps
from .tracks import EARTH_RADIUS, TrackSet, load_opensky, load_solent, load_tracks_csv, project, unproject

__all__ = ["TrackSet", "load_opensky", "load_solent", "load_tracks_csv", "project", "unproject", "EARTH_RADIUS",
           "cut_at_gaps"]
