"""Saving fitted objects without pickle: one ``.npz`` holding the arrays and a JSON description.

The JSON part (stored as a byte array inside the ``.npz``) describes the object graph; arrays are
referenced by key. Loading uses ``numpy.load(..., allow_pickle=False)`` and rebuilds objects only
from a fixed registry of kbfilter and scikit-learn classes: nothing in a file can name code to run.
Every fitted array is stored as it is, so a loaded filter continues a run bit for bit.
"""

import io
import json
import zipfile
from collections import Counter
from pathlib import Path

import numpy as np
import scipy.sparse as sp

FORMAT = "kbfilter"
VERSION = 1

__all__ = ["FORMAT", "VERSION", "save", "load", "register"]

_REGISTRY = {}


def register(cls):
    """Allow instances of ``cls`` (their ``__dict__``) to be saved and loaded."""
    _REGISTRY[cls.__name__] = cls
    return cls


def _register_defaults():
    from sklearn.decomposition import PCA
    from sklearn.kernel_approximation import Nystroem, RBFSampler

    from . import features  # noqa: F401  (registers its classes)
    from .filters.kbf import KernelBayesFilter
    from .kernels import GaussianKernel, LaplaceKernel, LinearKernel
    from .linalg import SPDFactor, Woodbury
    from .rules.bayes_rule import KernelBayesRule
    from .rules.conditional import ConditionalEmbedding

    for cls in (KernelBayesFilter, KernelBayesRule, ConditionalEmbedding, GaussianKernel, LaplaceKernel,
                LinearKernel, SPDFactor, Woodbury, Nystroem, RBFSampler, PCA):
        _REGISTRY.setdefault(cls.__name__, cls)


class _Encoder:
    def __init__(self):
        self.arrays = {}

    def _array(self, arr):
        key = f"a{len(self.arrays)}"
        self.arrays[key] = arr
        return key

    def encode(self, value, where):
        from sklearn.neighbors import NearestNeighbors

        if value is None or isinstance(value, (bool, str)):
            return value
        if isinstance(value, (int, np.integer)):
            return int(value)
        if isinstance(value, (float, np.floating)):
            return {"t": "float", "v": repr(float(value))}  # repr keeps every bit, inf and nan too
        if isinstance(value, np.ndarray):
            if value.dtype.kind not in "biuf":
                raise ValueError(f"{where}: cannot save an array of dtype {value.dtype}")
            return {"t": "array", "key": self._array(value)}
        if sp.issparse(value):
            m = sp.csr_matrix(value)
            return {"t": "csr", "shape": list(m.shape), "data": self._array(m.data),
                    "indices": self._array(m.indices), "indptr": self._array(m.indptr)}
        if isinstance(value, Counter):
            return {"t": "counter", "items": {str(k): int(v) for k, v in value.items()}}
        if isinstance(value, dict):
            if not all(isinstance(k, str) for k in value):
                raise ValueError(f"{where}: cannot save a dict with non-string keys")
            return {"t": "dict", "items": {k: self.encode(v, f"{where}.{k}") for k, v in value.items()}}
        if isinstance(value, (list, tuple)):
            return {"t": type(value).__name__, "items": [self.encode(v, f"{where}[{i}]") for i, v in enumerate(value)]}
        if isinstance(value, NearestNeighbors):
            # the tree is rebuilt from the stored points (deterministic) rather than stored
            return {"t": "neighbors", "params": self.encode(value.get_params(), f"{where}.params"),
                    "X": self._array(np.asarray(value._fit_X))}
        name = type(value).__name__
        if _REGISTRY.get(name) is type(value):
            state = {k: self.encode(v, f"{where}.{k}") for k, v in vars(value).items()}
            return {"t": "object", "class": name, "state": state}
        raise ValueError(f"{where}: cannot save an object of type {name} (not in kbfilter's registry)")


class _Decoder:
    def __init__(self, arrays):
        self.arrays = arrays

    def _array(self, key):
        if key not in self.arrays:
            raise ValueError(f"array {key!r} is missing")
        return self.arrays[key]

    def decode(self, node):
        from sklearn.neighbors import NearestNeighbors

        if node is None or isinstance(node, (bool, str, int)):
            return node
        if not isinstance(node, dict) or "t" not in node:
            raise ValueError(f"unexpected entry {str(node)[:60]!r}")
        kind = node["t"]
        if kind == "float":
            return float(node["v"])
        if kind == "array":
            return self._array(node["key"])
        if kind == "csr":
            return sp.csr_matrix((self._array(node["data"]), self._array(node["indices"]),
                                  self._array(node["indptr"])), shape=tuple(node["shape"]))
        if kind == "counter":
            return Counter(node["items"])
        if kind == "dict":
            return {k: self.decode(v) for k, v in node["items"].items()}
        if kind in ("list", "tuple"):
            items = [self.decode(v) for v in node["items"]]
            return items if kind == "list" else tuple(items)
        if kind == "neighbors":
            return NearestNeighbors(**self.decode(node["params"])).fit(self._array(node["X"]))
        if kind == "object":
            cls = _REGISTRY.get(node["class"])
            if cls is None:
                raise ValueError(f"unknown class {node['class']!r}")
            obj = cls.__new__(cls)
            obj.__dict__.update({k: self.decode(v) for k, v in node["state"].items()})
            return obj
        raise ValueError(f"unknown entry type {kind!r}")


def save(obj, path):
    """Write ``obj`` (a fitted kbfilter object) to ``path`` as a pickle-free ``.npz``."""
    _register_defaults()
    encoder = _Encoder()
    root = encoder.encode(obj, type(obj).__name__)
    from . import __version__

    meta = {"format": FORMAT, "version": VERSION, "library": __version__, "root": root}
    blob = np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8)
    with open(Path(path), "wb") as fh:
        np.savez(fh, __meta__=blob, **encoder.arrays)
    return Path(path)


def load(path, expected=None):
    """Read an object written by :func:`save`; ``expected`` (a class) is checked if given.

    Raises ``ValueError`` with the path for a file that is not a kbfilter file, is truncated or
    tampered with, or was written in another format version.
    """
    _register_defaults()
    path = Path(path)
    try:
        with open(path, "rb") as fh:
            data = fh.read()
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
    except FileNotFoundError:
        raise
    except (zipfile.BadZipFile, ValueError, OSError, EOFError, KeyError) as exc:
        raise ValueError(f"{path}: not a readable kbfilter file ({exc})") from exc
    try:
        meta = json.loads(arrays.pop("__meta__").tobytes().decode("utf-8"))
    except (KeyError, UnicodeDecodeError, json.JSONDecodeError, AttributeError) as exc:
        raise ValueError(f"{path}: not a kbfilter file (no readable description inside)") from exc
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ValueError(f"{path}: not a kbfilter file")
    if meta.get("version") != VERSION:
        raise ValueError(f"{path}: written in kbfilter file format version {meta.get('version')!r}; "
                         f"this kbfilter reads version {VERSION}")
    try:
        obj = _Decoder(arrays).decode(meta.get("root"))
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise ValueError(f"{path}: damaged kbfilter file ({exc})") from exc
    if expected is not None and not isinstance(obj, expected):
        raise ValueError(f"{path}: holds a {type(obj).__name__}, expected a {expected.__name__}")
    return obj


class Persistent:
    """Mixin: ``obj.save(path)`` and ``Class.load(path)`` through :func:`save` / :func:`load`."""

    def save(self, path):
        """Write this object to ``path`` (a pickle-free ``.npz``); returns the path."""
        return save(self, path)

    @classmethod
    def load(cls, path):
        """Read an object of this class written by :meth:`save`."""
        return load(path, expected=cls)
