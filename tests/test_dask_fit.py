"""A training log given as dask arrays is fitted where its chunks are: the same filter as in memory,
on a cluster whose workers could not hold the log."""

import time
import warnings

import dask
import dask.array as da
import numpy as np
import pytest
from distributed import Client, LocalCluster

import kbfilter as kb
from kbfilter.filters.chunked import completed


@pytest.fixture(scope="module")
def log():
    system = kb.systems.Oscillation()
    return system.simulate(3000, rng=0), system.simulate(100, rng=1)


#: each worker's memory limit: a worker holding the 338 MiB log below would also hold its own
#: interpreter (well over 100 MiB with numpy, scikit-learn, dask and kbfilter) and pass it; the chunked
#: fit's own work has the rest (its peak was about 80 MiB above an idle worker's 180 MiB when measured)
WORKER_LIMIT = 400 * 2**20
INTERPRETER = 100 * 2**20


@pytest.fixture(scope="module")
def client():
    # processes, so that a worker past its memory limit is killed and the fit fails (not spilled
    # to disk or paused)
    no_relief = {"distributed.worker.memory.target": False, "distributed.worker.memory.spill": False,
                 "distributed.worker.memory.pause": False}
    with dask.config.set(no_relief), LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                                  memory_limit=WORKER_LIMIT, dashboard_address=":0") as cluster, \
            Client(cluster) as client:
        yield client


# the original rule's update amplifies round-off (it inverts a product of two regularised Grams)
@pytest.mark.parametrize("params, atol", [({}, 1e-10), ({"scale": 0.25, "n_neighbors": 7, "reg_transition": 1e-3}, 1e-10),
                                          ({"rule": "original", "outlier_quantile": 0.99}, 1e-6)])
def test_a_dask_log_fits_the_filter_memory_fits(client, log, params, atol):
    (states, obs), (_, test_obs) = log
    in_memory = kb.KernelBayesFilter(approximation="local", **params).fit(states, obs)
    # uneven chunks, the last a single state (it has no successor)
    chunks = (700, 700, 700, 899, 1)
    chunked = kb.KernelBayesFilter(approximation="local", **params).fit(da.from_array(states, chunks=(chunks, 2)),
                                                                        da.from_array(obs, chunks=(chunks, 2)))
    assert np.isclose(chunked.kernel_x_.bandwidth_, in_memory.kernel_x_.bandwidth_, rtol=1e-12, atol=0)
    assert np.array_equal(chunked.states_, in_memory.states_)
    # the local solves match to round-off (the columns' deviations are summed in another order)
    assert np.allclose(chunked.batch_filter(test_obs)[0], in_memory.batch_filter(test_obs)[0], rtol=0, atol=atol)


def test_a_dask_fit_counts_the_fallbacks_of_its_local_solves_as_the_memory_fit_does(client, monkeypatch):
    # every state three times and a negligible regulariser: each neighbourhood needs the jitter rule
    rng = np.random.default_rng(1)
    states = np.repeat(rng.normal(size=(100, 2)), 3, axis=0)
    obs = states + 0.1 * rng.normal(size=states.shape)
    params = {"approximation": "local", "reg_transition": 1e-300, "n_neighbors": 6}
    with pytest.warns(kb.NumericalWarning, match="Cholesky failed on 300 of 300"):
        in_memory = kb.KernelBayesFilter(**params).fit(states, obs)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # six chunks of 50 rows, kept apart (no merging): each had warned with its own count
        monkeypatch.setattr(kb.filters.chunked, "CHUNK_BYTES", 1)
        chunked = kb.KernelBayesFilter(**params).fit(da.from_array(states, chunks=(50, 2)),
                                                     da.from_array(obs, chunks=(50, 2)))
    assert [str(w.message) for w in caught if "local Gram" in str(w.message)] == [
        "local Gram: Cholesky failed on 300 of 300 neighbourhoods, solved by the fallback rules of "
        f"kbfilter.linalg.spd_factor (jitter {in_memory.diagnostics['transition_jitter']})"]
    assert in_memory.diagnostics["transition_jitter"] + in_memory.diagnostics["transition_lu"] == 300
    assert chunked.diagnostics == in_memory.diagnostics


def test_a_log_in_chunks_of_one_row_fits_as_in_memory_in_few_tasks():
    """Every pass over a log runs a task a chunk and the neighbour search one for each pair of
    chunks: 200 chunks of one row had run 42,738 tasks (39 s); small chunks are merged first."""
    from dask.callbacks import Callback

    class Count(Callback):
        tasks = 0

        def _pretask(self, key, dsk, state):
            Count.tasks += 1

    states, obs = kb.systems.Oscillation().simulate(200, rng=0)
    in_memory = kb.KernelBayesFilter(approximation="local").fit(states, obs)
    with dask.config.set(scheduler="sync"), Count():
        chunked = kb.KernelBayesFilter(approximation="local").fit(da.from_array(states, chunks=(1, 2)),
                                                                  da.from_array(obs, chunks=(1, 2)))
    assert 0 < Count.tasks < 1000
    assert np.allclose(chunked.batch_filter(obs[:50])[0], in_memory.batch_filter(obs[:50])[0], rtol=0, atol=1e-12)


def test_merged_chunks_stay_within_the_bound_and_keep_large_ones():
    from kbfilter.filters.chunked import CHUNK_BYTES, merged_chunks

    rows = CHUNK_BYTES // 64
    assert merged_chunks((1,) * (3 * rows), 64) == (rows,) * 3
    assert merged_chunks((rows - 1, 1, 1, 5 * rows, 2, 3), 64) == (rows, 1, 5 * rows, 5)
    assert merged_chunks((7,), 10 * CHUNK_BYTES) == (7,)


def test_scalar_states_and_observations_as_1d_dask_arrays_fit_as_in_memory():
    rng = np.random.default_rng(0)
    states = np.cumsum(rng.normal(size=300)) * 0.1
    obs = states + 0.1 * rng.normal(size=300)
    in_memory = kb.KernelBayesFilter(approximation="local").fit(states, obs)
    with dask.config.set(scheduler="sync"):
        chunked = kb.KernelBayesFilter(approximation="local").fit(da.from_array(states, chunks=70),
                                                                  da.from_array(obs, chunks=70))
    assert np.allclose(chunked.batch_filter(obs[:50])[0], in_memory.batch_filter(obs[:50])[0], rtol=0, atol=1e-12)
    chunked.predict()
    chunked.update(0.3)  # a scalar observation, as the in-memory filter takes it
    assert chunked.x.shape == (1,)


def test_the_workers_never_hold_the_log(client):
    """A log of 2 x 10^5 steps with 220-dimensional observations (355 MB, 338 MiB) on workers limited
    to 400 MiB each, their own interpreter included: a worker that held the log would pass its limit
    and be killed, and the fit would fail (joining the chunks on one worker did)."""
    T, dim_z = 200_000, 220
    rng = da.random.RandomState(0)  # (default_rng came in dask 2023.2; the floor is 2023.1)
    states = rng.standard_normal((T, 2), chunks=(10_000, 2)).cumsum(axis=0) * 0.01
    obs = da.concatenate([states + 0.1 * rng.standard_normal((T, 2), chunks=(10_000, 2)),
                          rng.standard_normal((T, dim_z - 2), chunks=(10_000, dim_z - 2))], axis=1)
    assert obs.nbytes + states.nbytes + INTERPRETER > WORKER_LIMIT
    kbf = kb.KernelBayesFilter(approximation="local").fit(states, obs)
    assert kbf.n_train_ == T and kbf.states_.shape == (T, 2)
    kbf.predict()
    kbf.update(np.zeros(dim_z))
    assert np.all(np.isfinite(kbf.x))


def test_the_search_holds_the_neighbours_of_the_chunks_given_not_of_merged_ones(client):
    """A log of 2 x 10^5 two-dimensional steps (6.4 MB) in chunks of 10^4 rows: small enough for the
    checks to join all of it in one chunk, but the neighbour search of one chunk of 2 x 10^5 rows
    holds 320 MB of neighbour lists, twice over while it merges them: past a worker's limit."""
    T = 200_000
    rng = da.random.RandomState(1)
    states = rng.standard_normal((T, 2), chunks=(10_000, 2)).cumsum(axis=0) * 0.01
    obs = states + 0.1 * rng.standard_normal((T, 2), chunks=(10_000, 2))
    kbf = kb.KernelBayesFilter(approximation="local").fit(states, obs)
    assert kbf.n_train_ == T


@pytest.mark.parametrize("bounded", [True, False])
def test_a_slow_reader_finds_few_results_waiting(client, bounded):
    """Bounded, at most twice the cluster's threads of tasks are in flight, so however far the reader
    falls behind, no more results than that wait on the workers; in one graph, all of them do."""
    def results_named(prefix, dask_worker):  # nested, so that it is sent by value (workers cannot import tests)
        return sum(str(key).startswith(prefix) for key in list(dask_worker.data.keys()))

    window = 2 * sum(client.nthreads().values())
    tasks = [dask.delayed(np.full)(1000, i, dask_key_name=f"slow-reader-{bounded}-{i}") for i in range(2 * window + 1)]
    got, waiting = {}, []
    for i, value in completed(tasks, bounded=bounded):
        got[i] = value
        time.sleep(0.25)  # the workers finish the tasks they were given meanwhile
        waiting.append(sum(client.run(results_named, f"slow-reader-{bounded}-").values()))
    assert sorted(got) == list(range(len(tasks))) and all(np.all(got[i] == i) for i in got)
    if bounded:
        assert max(waiting) <= window
    else:
        assert waiting[0] > window


@pytest.mark.parametrize("bounded", [True, False])
def test_a_task_given_twice_is_computed_once_and_yielded_at_both_places(client, bounded):
    """One array given as the states and the observations has the same chunk tasks twice: releasing
    the result of one had cancelled the other (FutureCancelledError)."""
    tasks = [dask.delayed(np.full)(3, i, dask_key_name=f"twice-{bounded}-{i}") for i in range(5)]
    got = sorted((i, float(value[0])) for i, value in completed(tasks + tasks[::-1], bounded=bounded))
    assert got == [(i, float(i % 5 if i < 5 else 9 - i)) for i in range(10)]


def test_one_dask_array_as_states_and_observations_fits_as_in_memory(client, log):
    (states, _), (test_states, _) = log
    in_memory = kb.KernelBayesFilter(approximation="local").fit(states, states)
    chunked_states = da.from_array(states, chunks=(1000, 2))
    chunked = kb.KernelBayesFilter(approximation="local").fit(chunked_states, chunked_states)
    assert np.allclose(chunked.batch_filter(test_states)[0], in_memory.batch_filter(test_states)[0], rtol=0, atol=1e-10)


def test_a_dask_log_is_checked_on_the_workers(client, log):
    (states, obs), _ = log
    bad = states.copy()
    bad[1234, 0] = np.nan
    with pytest.raises(ValueError, match=r"^states: contains NaN or infinite values \(the first at row 1234: nan\)$"):
        kb.KernelBayesFilter(approximation="local").fit(da.from_array(bad, chunks=500), da.from_array(obs, chunks=500))
    kept = da.from_array(states[:, 0], chunks=500) > -1e9
    with pytest.raises(ValueError, match=r"states: the dask array's chunk sizes are unknown .*compute_chunk_sizes\(\)"):
        kb.KernelBayesFilter(approximation="local").fit(da.from_array(states, chunks=500)[kept],
                                                        da.from_array(obs, chunks=500)[kept])
    with pytest.raises(ValueError, match="both as dask arrays"):
        kb.KernelBayesFilter(approximation="local").fit(da.from_array(states, chunks=500), obs)
    with pytest.raises(ValueError, match="same length"):
        kb.KernelBayesFilter(approximation="local").fit(da.from_array(states, chunks=500),
                                                        da.from_array(obs[:-1], chunks=500))
    with pytest.raises(ValueError, match="approximation='local'"):
        kb.KernelBayesFilter(approximation="exact").fit(da.from_array(states, chunks=500),
                                                        da.from_array(obs, chunks=500))
    with dask.config.set(scheduler="sync"):  # no cluster needed: the same fit in this process
        kbf = kb.KernelBayesFilter(approximation="auto").fit(da.from_array(states, chunks=1000),
                                                             da.from_array(obs, chunks=1000))
    assert kbf.n_train_ == len(states)
