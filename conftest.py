"""pytest's collection: the Stone Soup adapter's module is doctested only where Stone Soup is installed
(it is an optional extra; its tests skip themselves without it)."""

import importlib.util

collect_ignore = [] if importlib.util.find_spec("stonesoup") else ["kbfilter/stonesoup.py"]
