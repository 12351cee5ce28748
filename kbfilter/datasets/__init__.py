"""Recorded data shipped with kbfilter: real aircraft and ship tracks, and a loader for your own."""

from .tracks import EARTH_RADIUS, TrackSet, load_opensky, load_solent, load_tracks_csv, project, unproject

__all__ = ["TrackSet", "load_opensky", "load_solent", "load_tracks_csv", "project", "unproject", "EARTH_RADIUS"]
