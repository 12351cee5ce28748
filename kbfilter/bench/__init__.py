"""Benchmarks: methods x systems x seeded runs, with statistics, as three jobs.

- :mod:`~kbfilter.bench.catalogue`: which systems and methods there are, and how each is built;
- :mod:`~kbfilter.bench.runner`: seeded trials, in parallel through joblib (any backend);
- :mod:`~kbfilter.bench.report`: statistics, the table, result files and figures.

The protocol follows Xu et al. (2022, section 6.2): independent training and test runs, the
kernel Bayes filters tuned on the last steps of the training run only.
"""

from .catalogue import (BENCH_SYSTEMS, CATALOGUE, DEFAULT_METHODS, METHODS, PROTOCOLS, REFERENCE, SYSTEMS, BenchSystem,
                        Method, make_system, register_system)
from .report import format_table, run_and_report, summarise, write_results
from .runner import BenchConfig, bench_validation_length, check_bench_arguments, run_bench, run_trial

__all__ = ["BenchConfig", "BENCH_SYSTEMS", "BenchSystem", "register_system", "CATALOGUE", "DEFAULT_METHODS", "METHODS",
           "PROTOCOLS",
           "REFERENCE", "SYSTEMS", "Method", "make_system",
           "bench_validation_length", "check_bench_arguments", "run_bench", "run_trial", "summarise", "format_table",
           "write_results", "run_and_report"]
