"""Training logs given as dask arrays: checks, kernel summaries and nearest neighbours computed where
the chunks are.

A log too large for one process is given to ``fit`` as two dask arrays (states and observations,
one sequence, chunked by rows). What the fit needs from all of it is reduced on the workers: the
checks (finite values within the training bound), the columns' standard deviations, the few rows
the median heuristic reads (:func:`~kbfilter.kernels.median_rows`), and each state's nearest
predecessors. The last is exact: each row chunk's neighbours are searched block after block of the
states (sent to the workers once: they are a few columns), each task holding the chunk, one block
and the neighbours found so far, and a few such chains run at a time, so no worker ever holds more
than a few chunks and the result is the in-memory search's. Small row chunks are merged first
(:func:`merged_chunks`): every pass over the log runs a task a chunk, and the search one for each
pair of chunks. Results leave the workers as they finish (:func:`completed`).

dask is imported on first use: it is needed only for logs given as dask arrays
(``pip install "kbfilter[cluster]"``).
"""

import itertools

import numpy as np
from sklearn.neighbors import NearestNeighbors

from .._validation import check_training_magnitude, non_finite_error
from ..kernels import as_kernel, median_rows


def is_dask_array(x):
    """Whether ``x`` is a dask array (without importing dask).

    Parameters
    ----------
    x : object
        Anything.

    Returns
    -------
    bool
        True for a ``dask.array.Array``.
    """
    return type(x).__module__.split(".")[0] == "dask" and hasattr(x, "chunks") and hasattr(x, "to_delayed")


#: the bytes of a row chunk of the log (states and observations) that :func:`checked_log` merges small
#: chunks up to, and of one task's neighbours (``q x m`` distances and rows, ``q x m x dim_x``
#: inputs) that :func:`search_chunks` does: every chunk is a task of each pass over the log, and the
#: neighbour search runs one for each pair of chunks (a log in chunks of one row had hundreds of
#: thousands of tasks at T = 600)
CHUNK_BYTES = 2**24


def merged_chunks(chunks, row_bytes):
    """Consecutive row chunks merged while a merged chunk stays within :data:`CHUNK_BYTES` (a chunk
    larger than that stays as it is: its size was the caller's choice).

    Parameters
    ----------
    chunks : tuple of int
        The row chunks.
    row_bytes : int
        The bytes a row stands for.

    Returns
    -------
    tuple of int
        Row chunks covering the same rows, no more of them than given.
    """
    rows = max(1, CHUNK_BYTES // row_bytes)
    merged = []
    for size in chunks:
        if merged and merged[-1] + size <= rows:
            merged[-1] += size
        else:
            merged.append(size)
    return tuple(merged)


def search_chunks(chunks, dim_x, m):
    """The row chunks of the nearest-predecessor search (:func:`nearest_predecessors`): the log's
    as given, merged while a chunk's neighbours stay within :data:`CHUNK_BYTES`.

    Parameters
    ----------
    chunks : tuple of int
        The log's row chunks as given (before :func:`checked_log` merged them for the log's bound).
    dim_x : int
        The state's dimension.
    m : int
        Neighbourhood size.

    Returns
    -------
    tuple of int
        Row chunks covering the same rows.
    """
    return merged_chunks(chunks, 8 * m * (dim_x + 2))


def checked_log(states, observations):
    """One training sequence given as dask arrays, checked on the workers.

    Parameters
    ----------
    states : dask.array.Array of shape (T, dim_x) or (T,)
        The states.
    observations : dask.array.Array of shape (T, dim_z) or (T,)
        Their observations (vectors, or scalars as a 1-D array).

    Returns
    -------
    X, Z : dask.array.Array
        Float64, chunked by rows alike (small chunks merged: :func:`merged_chunks`), each row chunk
        holding all the columns.

    Raises
    ------
    ValueError
        Naming the argument: not both dask arrays, of unknown chunk sizes, not 1-D or 2-D, of different
        lengths, or holding NaN, inf or values beyond the training bound.
    """
    import dask
    import dask.array as da

    if not (is_dask_array(states) and is_dask_array(observations)):
        raise ValueError("states and observations: a log given as dask arrays needs both as dask arrays "
                         f"(got {type(states).__name__} and {type(observations).__name__})")
    for name, arr in (("states", states), ("observations", observations)):
        if np.isnan(arr.shape).any():
            raise ValueError(f"{name}: the dask array's chunk sizes are unknown (as after indexing it with a dask "
                             f"array); call {name}.compute_chunk_sizes() first")
        if arr.ndim not in (1, 2):
            raise ValueError(f"{name}: expected a dask array of shape (T,) or (T, columns), got shape {arr.shape}")
        if not np.issubdtype(arr.dtype, np.number) or np.issubdtype(arr.dtype, np.complexfloating):
            raise ValueError(f"{name}: expected real numbers, got dtype {arr.dtype}")
    if states.shape[0] != observations.shape[0]:
        raise ValueError(f"states and observations: expected the same length, got {states.shape[0]} and "
                         f"{observations.shape[0]}")
    # a 1-D array is a column, as in memory (scalar states or observations)
    states, observations = (arr if arr.ndim == 2 else arr[:, None] for arr in (states, observations))
    rows = merged_chunks(states.chunks[0], 8 * (states.shape[1] + observations.shape[1]))
    X = states.astype(np.float64).rechunk({0: rows, 1: -1})
    Z = observations.astype(np.float64).rechunk({0: rows, 1: -1})
    finite_x, finite_z, largest_x, largest_z = dask.compute(
        da.isfinite(X).all(), da.isfinite(Z).all(), abs(X).max(), abs(Z).max())
    for name, arr, finite, largest in (("states", X, finite_x, largest_x), ("observations", Z, finite_z, largest_z)):
        if not finite:
            # located as an in-memory log's is (one more pass, on the failing path only)
            row = int(da.argmin(da.isfinite(arr).all(axis=1)).compute())
            raise non_finite_error(name, "row", row, arr[row].compute())
        check_training_magnitude(float(largest), name)
    return X, Z


def _client():
    # the distributed client this process works with, or None (dask's local scheduler)
    try:
        from distributed import get_client
        return get_client()
    except (ImportError, ValueError):
        return None


def completed(tasks, bounded=False):
    """Compute lazy tasks, yielding ``(i, result)`` as each finishes; on a distributed client each
    result leaves its worker as soon as it is done (``dask.compute`` would keep every result on the
    workers until the last one finishes). Without a client they are computed here.

    Parameters
    ----------
    tasks : list of dask.delayed.Delayed
        The tasks; the same task given twice (as the chunks of one array given as both the states
        and the observations are) is computed once and yielded at both positions.
    bounded : bool, default=False
        On a client, keep at most twice the cluster's worker threads of tasks in flight, the next
        submitted as one finishes: the workers then hold the intermediate results of a bounded number
        of tasks, where one graph of all of them lets the scheduler start every task at once. Tasks
        submitted apart share no work: what they share should be :func:`scattered`.

    Yields
    ------
    (int, object)
        A task's position in ``tasks`` and its result.
    """
    import dask

    client = _client()
    if client is None:
        yield from enumerate(dask.compute(*tasks))
        return
    from distributed import as_completed

    # one future a key: the scheduler knows a task by its key, so releasing the future of one of
    # two equal tasks had cancelled the other
    positions = {}
    for i, task in enumerate(tasks):
        positions.setdefault(task.key, (task, []))[1].append(i)
    window = 2 * max(1, sum(client.nthreads().values())) if bounded else len(positions)
    waiting = iter(positions.values())
    running = as_completed()

    def submit(n):
        pending = [task for task, _ in itertools.islice(waiting, n)]
        for future in client.compute(pending):
            running.add(future)

    submit(window)
    for future in running:
        result = future.result()
        future.release()
        submit(1)
        for i in positions[future.key][1]:
            yield i, result


def scattered(x, chunks):
    """An array of this process as a dask array chunked by rows, its chunks sent to the workers once
    (a distributed client's ``scatter``) so that tasks submitted apart share them; without a client,
    the array itself in chunks.

    Parameters
    ----------
    x : ndarray of shape (T, d)
        The array.
    chunks : tuple of int
        The row chunks' lengths (summing to T).

    Returns
    -------
    dask.array.Array
        ``x``, chunked by rows only.
    """
    import dask.array as da

    client = _client()
    if client is None:
        return da.from_array(x, chunks=(tuple(chunks), x.shape[1]))
    starts = np.concatenate([[0], np.cumsum(chunks)])
    blocks = [x[a:b] for a, b in zip(starts[:-1], starts[1:])]
    return da.concatenate([da.from_delayed(future, block.shape, x.dtype)
                           for future, block in zip(client.scatter(blocks), blocks)])


def gathered(*arrays):
    """Dask arrays brought to this process chunk by chunk (``compute()`` would first join every
    chunk on one worker).

    Parameters
    ----------
    *arrays : dask.array.Array
        Arrays chunked by rows only.

    Returns
    -------
    list of ndarray
        The arrays.
    """
    out = [np.empty(arr.shape, dtype=arr.dtype) for arr in arrays]
    starts = [np.concatenate([[0], np.cumsum(arr.chunks[0])]) for arr in arrays]
    tasks = [(a, i, block) for a, arr in enumerate(arrays) for i, block in enumerate(arr.to_delayed().ravel())]
    for k, piece in completed([block for _, _, block in tasks]):
        a, i, _ = tasks[k]
        out[a][starts[a][i]:starts[a][i + 1]] = piece
    return out


def summary_fitted_kernel(kernel, name, data):
    """:func:`~kbfilter.kernels.fitted_kernel` for a dask array: a radial kernel fitted from the
    columns' standard deviations and the median heuristic's rows, computed on the workers.

    Parameters
    ----------
    kernel : Kernel or None
        The kernel (a frozen one is returned as it is).
    name : str
        The argument's name, for error messages.
    data : dask.array.Array of shape (T, d)
        The data.

    Returns
    -------
    Kernel
        The fitted kernel.
    """
    import dask

    if getattr(kernel, "frozen_", False):
        return kernel
    kernel = as_kernel(kernel, name)
    if not kernel.is_radial:
        raise ValueError(f"{name}: a log given as dask arrays needs a radial kernel (Gaussian or Laplace), got "
                         f"{type(kernel).__name__}")
    try:
        rows = np.sort(median_rows(data.shape[0], kernel.max_median_points, kernel.random_state))
        column_std, sample = dask.compute(data.std(axis=0), data[rows])
        return kernel.fit_summary(column_std, sample)
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from exc


def _nearer(found, Q, B, offset, n_candidates, kernel, m):
    # the m nearest to each query among those found so far and the block's first n_candidates rows
    B = B[:n_candidates]
    if not len(B):
        return found
    dist, local = NearestNeighbors(n_neighbors=min(m, len(B))).fit(kernel.coordinates(B)).kneighbors(
        kernel.coordinates(Q))
    if found is None:
        return dist, local + offset, B[local]
    dist, rows, inputs = (np.concatenate(parts, axis=1) for parts in zip(found, (dist, local + offset, B[local])))
    # nearer first, ties by row: the order one search over all the rows gives
    order = np.lexsort((rows, dist), axis=1)[:, :m]
    return (np.take_along_axis(dist, order, axis=1), np.take_along_axis(rows, order, axis=1),
            np.take_along_axis(inputs, order[:, :, None], axis=1))


def nearest_predecessors(X, kernel, m):
    """Each state's ``m`` nearest predecessors (rows ``0 .. T-2``) in the kernel's coordinates, as
    one lazy result per row chunk of ``X``.

    Parameters
    ----------
    X : dask.array.Array of shape (T, d)
        The states, chunked by rows (:func:`scattered`, when the chains are computed apart).
    kernel : Kernel
        The fitted radial state kernel.
    m : int
        Neighbourhood size (at most ``T - 1``).

    Returns
    -------
    list of (dask.delayed.Delayed, dask.delayed.Delayed)
        For each row chunk: the chunk, and ``(distances, rows, inputs)`` of its rows' neighbours,
        of shapes (q, m), (q, m), (q, m, d), nearer first.
    """
    import dask

    blocks = list(X.to_delayed().ravel())
    starts = np.concatenate([[0], np.cumsum(X.chunks[0])])
    T = X.shape[0]
    out = []
    for Q in blocks:
        # block after block, each task holding the query chunk, one block and the neighbours so far
        found = None
        for B, start, stop in zip(blocks, starts[:-1], starts[1:]):
            found = dask.delayed(_nearer)(found, Q, B, int(start), int(min(stop, T - 1) - start), kernel, m)
        out.append((Q, found))
    return out
