"""Saving fitted objects without pickle: one ``.npz`` holding the arrays and a JSON description.

This module is part of the floor: it imports nothing from the rest of kbfilter. A class becomes
persistent by decorating itself where it is defined::

    @persistent("coef_", "n_train_")
    class Thing(Persistent, BaseEstimator): ...

The decorator names what the class saves, and nothing else is written: a scikit-learn-style
estimator saves its parameters (``get_params(deep=False)``) and the listed fitted attributes, and
is rebuilt as ``cls(**params)`` with those attributes set; any other class saves the listed
attributes, which must be its constructor's arguments, and is rebuilt as ``cls(**fields)``. Run-time
scratch that is not listed is not saved, so the file format is the set of declared names.

A field or parameter that holds objects says which: ``holds={"kernel_x": "Kernel"}`` admits any
registered class with a base of that name (``"TransformerMixin"`` admits every feature map,
``("SPDFactor", "Woodbury")`` either). Every other field holds plain values and arrays only. The
rule is applied both ways: :func:`save` refuses an object where its field declares none (so no
file is written that could not be read), and :func:`load` refuses one before building it, so a
file cannot make ``load`` construct a class where none belongs.

scikit-learn parts (``PCA``, ``Nystroem``, ``RBFSampler``, ``StandardScaler``) are saved as their
parameters plus their public fitted attributes (the names ending in ``_``), which is everything
their ``transform`` reads. Their meaning can change between scikit-learn releases, so the file
records the scikit-learn version, and a file holding such parts is refused, with a message, by a
scikit-learn of another minor version.

Loading reads ``.npy`` members without pickle and builds only registered classes: nothing in a
file can name code to run. ``save(..., key=...)`` adds a keyed checksum (HMAC-SHA256 over the
description and every array), and ``load(..., key=...)`` refuses a file whose checksum does not
match before it builds anything: the one way to detect consistent tampering of valid values.
Every fitted array is stored as it is, so a loaded object continues a run bit for bit.
"""

import hashlib
import hmac
import json
import os
import uuid
import zipfile
from collections import Counter
from importlib.metadata import PackageNotFoundError, version as _package_version

import numpy as np
import scipy.sparse as sp
import sklearn
from sklearn.decomposition import PCA
from sklearn.kernel_approximation import Nystroem, RBFSampler
from sklearn.preprocessing import StandardScaler

from ._validation import check_path, check_within_magnitude

FORMAT = "kbfilter"
VERSION = 17

__all__ = ["FORMAT", "VERSION", "MAX_BYTES", "MAX_DEPTH", "MAX_NODES", "Persistent", "persistent", "registered",
           "saved_before_fit", "save", "load"]

#: the most array data :func:`load` reads from one file, in bytes (``load(path, max_bytes=...)`` raises it)
MAX_BYTES = 4 * 2**30
#: the deepest nesting a file's description may have
MAX_DEPTH = 64
#: the most entries a file's description may have
MAX_NODES = 200_000
# the description is one JSON document; anything larger than this is not a kbfilter file
_MAX_DESCRIPTION = 64 * 2**20

# the checksum's member, and what its message starts with (so another scheme can never collide with it)
_SIGNATURE = "__signature__"
_SIGNED = b"kbfilter-hmac-sha256\0"
# class name -> (class, names of the saved fields, {field or parameter: admitted class names})
_REGISTRY = {}
# where a file's root may be any saved class
_ANY = ("object",)
# scikit-learn classes saved by parameters and public fitted attributes
_SKLEARN = {cls.__name__: cls for cls in (PCA, Nystroem, RBFSampler, StandardScaler)}


def persistent(*fields, holds=None):
    """Class decorator: instances can be saved with :func:`save`, saving ``fields`` (see module doc).

    ``holds`` maps each field or parameter that holds objects to the admitted class names (a name
    or a tuple of names, each matching a class or any of its bases)."""
    holds = {k: (v,) if isinstance(v, str) else tuple(v) for k, v in (holds or {}).items()}

    def register(cls):
        known = _REGISTRY.get(cls.__name__, (cls,))[0]
        if (known.__module__, known.__qualname__) != (cls.__module__, cls.__qualname__):
            raise ValueError(f"persistent: another class named {cls.__name__!r} is already registered "
                             f"(from {known.__module__})")
        _REGISTRY[cls.__name__] = (cls, tuple(fields), holds)
        return cls

    return register


def registered():
    """Names of the classes :func:`save` can write: kbfilter's registered classes and the
    scikit-learn classes it saves by parameters and fitted attributes.

    Returns
    -------
    list of str
        The class names, sorted.
    """
    return sorted(_REGISTRY) + sorted(_SKLEARN)


def with_saved_layout(part):
    """A scikit-learn part just fitted, its fitted arrays laid out as :func:`load` gives them back.

    BLAS may round a product in the last bits by its operands' memory layout, and ``load`` returns
    every array contiguous (in C or Fortran order, as saved). A part that keeps a strided view
    (``PCA.components_`` from a randomized or an ARPACK SVD, or from any SVD under scikit-learn
    1.3) would compute otherwise than its loaded copy, and a loaded filter would not continue its
    run bit for bit; so kbfilter calls this on each part it fits. Any other object is returned as
    it is.

    Parameters
    ----------
    part : object
        A fitted transformer (changed in place: a strided fitted array becomes a contiguous copy,
        equal in value).

    Returns
    -------
    object
        ``part``.
    """
    if _SKLEARN.get(type(part).__name__) is type(part):
        for name, value in list(vars(part).items()):
            if (name.endswith("_") and not name.startswith("_") and isinstance(value, np.ndarray)
                    and not (value.flags.c_contiguous or value.flags.f_contiguous)):
                setattr(part, name, np.ascontiguousarray(value))
    return part


def saved_before_fit(obj, fitted):
    """Whether a loaded ``obj`` was saved before fit: its declared field ``fitted`` is absent.

    A class calls this first in ``_after_load`` and returns early when it is true. A file without
    ``fitted`` that holds any other field the class declares is refused: fitted state without the
    fitted part it belongs to is a damaged or crafted file.

    Parameters
    ----------
    obj : object
        A loaded instance of a registered class.
    fitted : str
        The field that fit always sets (e.g. ``"model_"``).

    Returns
    -------
    bool
        True when the object holds none of its fitted fields (it loads as it was saved, its
        parameters only); False when it holds ``fitted``.
    """
    if hasattr(obj, fitted):
        return False
    present = sorted(name for name in _REGISTRY[type(obj).__name__][1] if name in vars(obj))
    if present:
        raise ValueError(f"{type(obj).__name__}: the file holds {present} but not {fitted}, the fitted part they "
                         f"belong to")
    return True


def _admitted(cls, allowed):
    return allowed is _ANY or any(base.__name__ in (allowed or ()) for base in cls.__mro__)


def _not_here(name, where, allowed):
    takes = " or ".join(allowed) if allowed else "plain values and arrays only"
    return f"{where}: a {name} does not belong here (this field takes {takes})"


def _is_estimator(obj):
    return callable(getattr(obj, "get_params", None))


def _minor(version_string):
    return tuple(version_string.split(".")[:2])


def _kbfilter_version():
    try:
        return _package_version("kbfilter")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "unknown"


class _Encoder:
    def __init__(self):
        self.arrays = {}
        self.uses_sklearn = False
        self._keys = {}  # id(array) -> key: an array that several parts share is written once

    def _array(self, arr):
        key = self._keys.get(id(arr))
        if key is None:
            key = self._keys[id(arr)] = f"a{len(self.arrays)}"
            self.arrays[key] = arr
        return key

    def encode(self, value, where, allowed=None):
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
            return {"t": "dict", "items": {k: self.encode(v, f"{where}.{k}", allowed) for k, v in value.items()}}
        if isinstance(value, (list, tuple)):
            return {"t": type(value).__name__,
                    "items": [self.encode(v, f"{where}[{i}]", allowed) for i, v in enumerate(value)]}
        name = type(value).__name__
        if _SKLEARN.get(name) is type(value):
            if not _admitted(type(value), allowed):
                raise ValueError(_not_here(name, where, allowed))
            self.uses_sklearn = True
            fitted = {k: v for k, v in vars(value).items() if k.endswith("_") and not k.startswith("_")}
            return {"t": "sklearn", "class": name, "params": self._fields(value.get_params(deep=False), where),
                    "fitted": self._fields(fitted, where)}
        cls, fields, holds = _REGISTRY.get(name, (None, (), {}))
        if cls is not type(value):
            raise ValueError(f"{where}: cannot save an object of type {name} (kbfilter saves its own classes "
                             f"and scikit-learn's {', '.join(sorted(_SKLEARN))})")
        if not _admitted(cls, allowed):
            raise ValueError(_not_here(name, where, allowed))
        node = {"t": "object", "class": name}
        if _is_estimator(value):
            node["params"] = self._fields(value.get_params(deep=False), where, holds)
        node["fields"] = self._fields({k: getattr(value, k) for k in fields if hasattr(value, k)}, where, holds)
        return node

    def _fields(self, mapping, where, holds=None):
        holds = holds or {}
        return {k: self.encode(v, f"{where}.{k}", holds.get(k)) for k, v in mapping.items()}


class _Decoder:
    def __init__(self, arrays):
        self.arrays = arrays

    def _array(self, key):
        if key not in self.arrays:
            raise ValueError(f"array {key!r} is missing")
        return self.arrays[key]

    def _fields(self, node, key, where, holds=None):
        holds = holds or {}
        items = node.get(key, {})
        if not isinstance(items, dict):
            raise ValueError(f"{where}: its {key} are not a mapping")
        return {k: self.decode(v, f"{where}.{k}", holds.get(k)) for k, v in items.items()}

    def decode(self, node, where, allowed=None):
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
            shape = tuple(node["shape"])
            if len(shape) != 2 or not all(isinstance(d, int) and 0 <= d < 2**31 for d in shape):
                raise ValueError(f"a sparse matrix's shape {shape!r} is not two non-negative sizes")
            m = sp.csr_matrix((self._array(node["data"]), self._array(node["indices"]),
                               self._array(node["indptr"])), shape=shape)
            m.check_format(full_check=True)  # indices in range, indptr monotone: else a crash at use
            return m
        if kind == "counter":
            return Counter(node["items"])
        if kind == "dict":
            return {k: self.decode(v, f"{where}.{k}", allowed) for k, v in node["items"].items()}
        if kind in ("list", "tuple"):
            items = [self.decode(v, f"{where}[{i}]", allowed) for i, v in enumerate(node["items"])]
            return items if kind == "list" else tuple(items)
        if kind == "sklearn":
            cls = _SKLEARN.get(node["class"])
            if cls is None:
                raise ValueError(f"{where}: unknown class {node['class']!r}")
            if not _admitted(cls, allowed):
                raise ValueError(_not_here(node["class"], where, allowed))
            fitted = self._fields(node, "fitted", where)
            # what save writes: public fitted attributes, never a method or the instance's __dict__
            odd = sorted(k for k in fitted if not k.endswith("_") or k.startswith("_") or hasattr(cls, k))
            if odd:
                raise ValueError(f"{where}: {odd} are not fitted attributes of a {node['class']}")
            params = self._fields(node, "params", where)
            _check_jobs(params.get("n_jobs"), f"{where}.n_jobs")
            part = self._set(cls(**params), fitted)
            if fitted:  # (a part given as a parameter is saved unfitted)
                _probe_part(part, where)
            return part
        if kind == "object":
            cls, names, holds = _REGISTRY.get(node["class"], (None, (), {}))
            if cls is None:
                raise ValueError(f"{where}: unknown class {node['class']!r}")
            if not _admitted(cls, allowed):  # checked before anything of it is built
                raise ValueError(_not_here(node["class"], where, allowed))
            fields = self._fields(node, "fields", where, holds)
            unknown = set(fields) - set(names)
            if unknown:
                raise ValueError(f"{where}: unexpected fields {sorted(unknown)}")
            if "params" not in node:
                obj = cls(**fields)
            else:
                obj = self._set(cls(**self._fields(node, "params", where, holds)), fields)
            restore = getattr(obj, "_after_load", None)
            if restore is not None:
                restore()
            return obj
        raise ValueError(f"unknown entry type {kind!r}")

    @staticmethod
    def _set(obj, fields):
        for k, v in fields.items():
            restore = getattr(getattr(type(obj), k, None), "restore", None)
            if restore is not None:  # a field its class keeps read-only (a filter's estimate)
                restore(obj, v)
            else:
                setattr(obj, k, v)
        return obj


def _check_key(key):
    if key is None:
        return None
    if isinstance(key, str):
        key = key.encode("utf-8")
    if not isinstance(key, (bytes, bytearray)) or len(key) == 0:
        raise ValueError(f"key: expected a non-empty bytes or str secret, got {type(key).__name__}")
    return bytes(key)


def _signature(key, blob, arrays):
    """HMAC-SHA256 over the description and every array (its name, dtype, shape and data)."""
    mac = hmac.new(key, _SIGNED, hashlib.sha256)
    mac.update(len(blob).to_bytes(8, "little") + bytes(blob))
    for name in sorted(arrays):
        arr = np.asarray(arrays[name])
        header = json.dumps([name, arr.dtype.str, list(arr.shape)]).encode("utf-8")
        mac.update(len(header).to_bytes(8, "little") + header)
        mac.update(np.ascontiguousarray(arr).data)
    return np.frombuffer(mac.digest(), dtype=np.uint8)


def save(obj, path, key=None):
    """Write a fitted kbfilter object to a pickle-free ``.npz`` file.

    Parameters
    ----------
    obj : object
        A kbfilter object (filter, rule, embedding, kernel, ...), fitted or not.
    path : str or path-like
        The file to write.
    key : bytes or str, optional
        A secret: the file then carries a keyed checksum (HMAC-SHA256) of everything in it, which
        ``load(path, key=key)`` checks. Without it, the file is unsigned.

    Returns
    -------
    pathlib.Path
        The path written.

    Raises
    ------
    ValueError
        Naming the attribute, when something in the object cannot be saved.

    Notes
    -----
    The file is written beside ``path`` and then moved over it, so a save that fails part way
    leaves a file already at ``path`` as it was.
    """
    key = _check_key(key)
    path = check_path(path)
    if path.is_dir():
        raise ValueError(f"path: {path} is a directory; expected the name of the file to write")
    if not path.parent.is_dir():
        raise ValueError(f"path: the directory {path.parent} does not exist")
    encoder = _Encoder()
    root = encoder.encode(obj, type(obj).__name__, _ANY)
    versions = {"kbfilter": _kbfilter_version(), "numpy": np.__version__}
    if encoder.uses_sklearn:
        versions["scikit-learn"] = sklearn.__version__
    meta = {"format": FORMAT, "version": VERSION, "versions": versions, "root": root}
    blob = np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8)
    signed = {} if key is None else {_SIGNATURE: _signature(key, blob, encoder.arrays)}
    # written beside the target and moved over it in one step: a save that fails part way (a full
    # disk, an interrupt) leaves an earlier file at ``path`` as it was, not truncated; a symbolic
    # link keeps pointing where it did, at the file written
    target = path.resolve() if path.is_symlink() else path
    partial = target.with_name(f".{target.name}.{uuid.uuid4().hex}.partial")
    try:
        with open(partial, "xb") as fh:
            np.savez(fh, __meta__=blob, **encoder.arrays, **signed)
        os.replace(partial, target)
    finally:
        if partial.exists():
            partial.unlink()
    return path


def _check_versions(path, meta):
    if meta.get("version") != VERSION:
        written = meta.get("versions", {}).get("kbfilter") or meta.get("library") or "an unknown version"
        raise ValueError(f"{path}: written by kbfilter {written} in file format {meta.get('version')!r}, which "
                         f"this kbfilter (file format {VERSION}) cannot read; fit the object again and save it")
    written = meta.get("versions", {}).get("scikit-learn")
    if written is not None and _minor(written) != _minor(sklearn.__version__):
        raise ValueError(f"{path}: holds scikit-learn parts written with scikit-learn {written}; this environment "
                         f"has {sklearn.__version__}, and fitted scikit-learn objects are not guaranteed to mean "
                         f"the same across minor versions. Install scikit-learn {'.'.join(_minor(written))}.x "
                         f"to load it, or fit the object again")


def _check_jobs(n_jobs, where):
    """A saved part's ``n_jobs``: None or an integer, and no more processes than this machine has
    processors. It is the machine's setting, not the model's: a file that asked for 10**12 would
    have a part that splits its work into as many pieces (scikit-learn 1.3's pairwise kernels do)
    or starts as many workers."""
    if n_jobs is None:
        return
    cpus = os.cpu_count() or 1
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, int) or n_jobs > cpus:
        raise ValueError(f"{where}: expected None or an integer up to this machine's {cpus} processors, got "
                         f"{n_jobs!r}")


# the shape of each fitted array a scikit-learn part's ``transform`` reads, by axis: "n" is the
# input width (n_features_in_), a name the part has is that attribute (a positive integer), and
# any other name is the length its first array gives. Checked because numpy broadcasts: a scaler's
# mean of one entry, or a 0-d random offset, maps every input without complaint, to another map
_LAYOUTS = {
    "StandardScaler": {"mean_": ("n",), "var_": ("n",), "scale_": ("n",)},
    "RBFSampler": {"random_weights_": ("n", "n_components"), "random_offset_": ("n_components",)},
    "Nystroem": {"components_": ("c", "n"), "normalization_": ("c", "c"), "component_indices_": ("c",)},
    "PCA": {"components_": ("n_components_", "n"), "mean_": ("n",), "explained_variance_": ("n_components_",),
            "explained_variance_ratio_": ("n_components_",), "singular_values_": ("n_components_",)},
}
# fitted arrays in squared units: within the square of the training bound, not the bound itself
_SQUARED = {"var_", "explained_variance_"}
# spreads fit never makes negative (a scale of 0 is stored as 1)
_NON_NEGATIVE = {"var_", "explained_variance_", "explained_variance_ratio_", "singular_values_"}


def _check_layout(part, where):
    """Each fitted array of a scikit-learn part read from a file has its class's shape (see
    ``_LAYOUTS``), the dtype fit stores, and finite values within the training bound."""
    lengths = {"n": part.n_features_in_}
    for name, axes in _LAYOUTS[type(part).__name__].items():
        arr = getattr(part, name, None)
        if arr is None and name in ("mean_", "var_", "scale_"):  # a scaler without centring or scaling
            continue
        indices = name == "component_indices_"
        if not (isinstance(arr, np.ndarray) and (arr.dtype.kind in "iu" if indices else arr.dtype == np.float64)):
            raise ValueError(f"{where}.{name}: expected {'an integer' if indices else 'a float64'} array, as fit "
                             f"stores it")
        for axis in axes:
            if axis not in lengths and hasattr(part, axis):
                size = getattr(part, axis)
                if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1:
                    raise ValueError(f"{where}.{axis}: expected a positive integer, got {size!r}")
                lengths[axis] = int(size)
            elif axis not in lengths and arr.ndim == len(axes):
                lengths[axis] = arr.shape[axes.index(axis)]
        if arr.shape != tuple(lengths.get(axis) for axis in axes):
            expected = ", ".join(str(lengths.get(axis, axis)) for axis in axes)
            raise ValueError(f"{where}.{name}: expected shape ({expected}{',' * (len(axes) == 1)}) (as the saved "
                             f"{type(part).__name__}'s input width and sizes say), got {arr.shape}")
        if not indices:
            if not np.all(np.isfinite(arr)):
                raise ValueError(f"{where}.{name}: contains NaN or infinite values")
            check_within_magnitude(np.sqrt(np.abs(arr)) if name in _SQUARED else arr, f"{where}.{name}")
            if (name in _NON_NEGATIVE and np.any(arr < 0)) or (name == "scale_" and np.any(arr <= 0)):
                raise ValueError(f"{where}.{name}: expected {'positive' if name == 'scale_' else 'non-negative'} "
                                 f"values, as fit leaves them")


def _probe_part(part, where):
    """A scikit-learn part from a file has the fitted arrays its class lays out, and maps a row of
    zeros of its input width to one finite row.

    Its parameters and fitted arrays are what ``transform`` reads: a kernel name it does not know,
    a component count that is not a number, NaN frequencies or an array of another shape fail
    here, where they would otherwise load and fail at the part's first use, with whatever error
    scikit-learn raises, or broadcast into another map and fail nowhere."""
    n = getattr(part, "n_features_in_", None)
    if isinstance(n, bool) or not isinstance(n, int) or not 0 < n < 2**31:
        raise ValueError(f"{where}.n_features_in_: expected a positive integer, got {n!r}")
    _check_layout(part, where)
    with np.errstate(all="ignore"):
        row = np.asarray(part.transform(np.zeros((1, n))), dtype=np.float64)
    if row.ndim != 2 or row.shape[0] != 1 or not np.all(np.isfinite(row)):
        raise ValueError(f"{where}: the saved {type(part).__name__} does not map an input to one finite row")


def _walk(root):
    """The array keys a description refers to; its depth and size are bounded first (a deep or huge
    description would exhaust the stack or the memory before any other check)."""
    keys, stack, count = [], [(root, 1)], 0
    while stack:
        node, depth = stack.pop()
        count += 1
        if depth > MAX_DEPTH or count > MAX_NODES:
            raise ValueError(f"its description is nested deeper than {MAX_DEPTH} or has more than {MAX_NODES} "
                             f"entries")
        if isinstance(node, dict):
            kind = node.get("t")
            if kind == "array":
                keys.append(node.get("key"))
            elif kind == "csr":
                keys.extend(node.get(k) for k in ("data", "indices", "indptr"))
            stack.extend((v, depth + 1) for v in node.values() if isinstance(v, (dict, list)))
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node if isinstance(v, (dict, list)))
    return keys


def _read_member(archive, name, budget):
    """One ``.npy`` member, its header checked (numeric dtype, declared size within ``budget``)
    before its data is read. Returns the array and the bytes it took."""
    if not isinstance(name, str) or f"{name}.npy" not in archive.namelist():
        raise ValueError(f"array {name!r} is missing")
    info = archive.getinfo(f"{name}.npy")
    with archive.open(info) as fh:
        version = np.lib.format.read_magic(fh)
        read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                       else np.lib.format.read_array_header_2_0)
        shape, fortran, dtype = read_header(fh)
        if dtype.hasobject or dtype.kind not in "biuf":
            raise ValueError(f"array {name!r} has dtype {dtype}; a kbfilter file holds numeric arrays only")
        nbytes = int(np.prod(shape, dtype=object)) * dtype.itemsize
        if nbytes > budget:
            raise ValueError(f"array {name!r} declares {nbytes} bytes, more than the {budget} left of max_bytes "
                             f"(load(..., max_bytes=...) raises the limit)")
        if info.file_size > nbytes + 2**16:  # the header and nothing else besides the data
            raise ValueError(f"array {name!r} holds {info.file_size} bytes for {nbytes} of data")
        data = fh.read(nbytes)
    if len(data) != nbytes:
        raise ValueError(f"array {name!r} is truncated")
    array = np.frombuffer(data, dtype=dtype)
    array = array.reshape(shape[::-1]).T if fortran else array.reshape(shape)
    return array.copy(order="K"), nbytes  # writable, owning its memory, in its saved memory order


def load(path, expected=None, max_bytes=MAX_BYTES, key=None):
    """Read an object written by :func:`save`, treating the file as untrusted input.

    Only what the file's description refers to is read; each array's header is checked (a numeric
    dtype, a declared size within ``max_bytes`` in all) before its data is read; the description's
    depth and size are bounded (:data:`MAX_DEPTH`, :data:`MAX_NODES`); only registered classes are
    built, and a sparse matrix is checked to be well formed. Whatever goes wrong is a ``ValueError``
    naming the file. Values a tampered file changes consistently (a different bandwidth, other
    weights) cannot be told from genuine ones without a signature: pass the ``key`` the file was
    saved with, and a file whose keyed checksum does not match is refused before anything in it
    is built.

    Parameters
    ----------
    path : str or path-like
        The file.
    expected : type, optional
        The class the object must be an instance of.
    max_bytes : int, default=MAX_BYTES
        The most array data to read (4 GiB by default).
    key : bytes or str, optional
        The secret the file was saved with: the file must then carry a matching checksum. Without
        it, a checksum in the file is not checked.

    Returns
    -------
    object
        The object, as it was saved.

    Raises
    ------
    ValueError
        With the path, for a file that is not a kbfilter file, is truncated or tampered with, was
        written in another file format, holds scikit-learn parts written by another scikit-learn
        minor version, holds more than ``max_bytes`` of arrays, holds an object of another
        class than ``expected``, or (with ``key``) is unsigned or does not match its checksum.
    """
    path = check_path(path)
    max_bytes = int(max_bytes)
    key = _check_key(key)
    try:
        archive = zipfile.ZipFile(path)
    except FileNotFoundError:
        raise
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        raise ValueError(f"{path}: not a readable kbfilter file ({exc})") from exc
    with archive:
        try:
            if archive.getinfo("__meta__.npy").file_size > _MAX_DESCRIPTION:
                raise ValueError("its description is larger than any kbfilter file's")
            blob, _ = _read_member(archive, "__meta__", _MAX_DESCRIPTION)
            meta = json.loads(blob.tobytes().decode("utf-8"))
        except KeyError as exc:
            raise ValueError(f"{path}: not a kbfilter file (no description inside)") from exc
        except Exception as exc:  # a damaged description is a damaged file, whatever the parser says
            raise ValueError(f"{path}: not a kbfilter file (no readable description inside: {exc})") from exc
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            raise ValueError(f"{path}: not a kbfilter file")
        versions = meta.get("versions", {})
        if not (isinstance(versions, dict) and all(isinstance(v, str) for v in versions.values())):
            raise ValueError(f"{path}: damaged kbfilter file (its versions are not a mapping of names to strings)")
        _check_versions(path, meta)
        root = meta.get("root")
        if not (isinstance(root, dict) and root.get("t") in ("object", "sklearn")
                and isinstance(root.get("class"), str)):
            raise ValueError(f"{path}: damaged kbfilter file (it holds no object)")
        named = (_REGISTRY.get(root["class"]) or (_SKLEARN.get(root["class"]),))[0]
        if expected is not None and not (named is not None and issubclass(named, expected)):
            raise ValueError(f"{path}: holds a {root['class']}, expected a {expected.__name__}")
        try:
            arrays, budget = {}, max_bytes
            for name in _walk(root):
                if name not in arrays:
                    arrays[name], used = _read_member(archive, name, budget)
                    budget -= used
        except Exception as exc:  # untrusted input: every failure is the file's, and said so
            raise ValueError(f"{path}: damaged kbfilter file ({type(exc).__name__}: {exc})") from exc
        if key is not None:
            if f"{_SIGNATURE}.npy" not in archive.namelist():
                raise ValueError(f"{path}: a key was given, but the file carries no checksum (saved without a key)")
            try:
                signature, _ = _read_member(archive, _SIGNATURE, 64)
            except ValueError as exc:
                raise ValueError(f"{path}: damaged checksum ({exc})") from exc
            if not hmac.compare_digest(signature.tobytes(), _signature(key, blob, arrays).tobytes()):
                raise ValueError(f"{path}: the file does not match its checksum under this key (changed "
                                 f"after it was saved, or saved with another key)")
        try:
            return _Decoder(arrays).decode(root, root["class"], _ANY)
        except Exception as exc:  # untrusted input: every failure is the file's, and said so
            raise ValueError(f"{path}: damaged kbfilter file ({type(exc).__name__}: {exc})") from exc


class Persistent:
    """Mixin: ``obj.save(path)`` and ``Class.load(path)`` through :func:`save` / :func:`load`.

    A class may define ``_after_load()`` to rebuild what it derives from its saved fields.
    """

    def save(self, path, key=None):
        """Write this object to ``path`` (a pickle-free ``.npz``).

        Parameters
        ----------
        path : str or path-like
            Where to write.
        key : bytes or str, optional
            A secret to sign the file with (see :func:`save`).

        Returns
        -------
        pathlib.Path
            The path written.
        """
        return save(self, path, key=key)

    @classmethod
    def load(cls, path, key=None):
        """Read an object of this class written by :meth:`save`.

        Parameters
        ----------
        path : str or path-like
            A file written by :meth:`save`.
        key : bytes or str, optional
            The secret the file was signed with; the file must then match it (see :func:`load`).

        Returns
        -------
        object
            An instance of this class.
        """
        return load(path, expected=cls, key=key)
