"""Sphinx configuration for kbfilter's documentation (``sphinx-build -W docs docs/_build/html``)."""

import os
import sys

sys.path.insert(0, os.path.abspath(".."))

import kbfilter  # noqa: E402

project = "kbfilter"
author = "the kbfilter developers"
release = kbfilter.__version__
version = release
extensions = ["sphinx.ext.autodoc", "sphinx.ext.mathjax", "sphinx.ext.intersphinx", "numpydoc"]
exclude_patterns = ["_build", "examples/*.csv"]
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False
intersphinx_mapping = {}
html_theme = "alabaster"
html_static_path = []
nitpicky = False
suppress_warnings = ["ref.ref"]
# scikit-learn's own methods (parameters, metadata routing, output containers) are documented there
autodoc_default_options = {"exclude-members": ",".join([
    "get_params", "set_params", "get_metadata_routing", "set_output", "fit_transform", "set_fit_request", "set_partial_fit_request",
    "set_score_request", "set_transform_request", "set_predict_request", "set_posterior_request"])}
