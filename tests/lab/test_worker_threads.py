"""Lab workers run numpy/scipy's BLAS and OpenMP on one thread, as they run torch (issue 31, item 2).

A worker given one core that runs a BLAS spinning one thread per core made fig1's SVDs, k-means
and t-SNE 1.3–30× slower (benchmarks/README.md). The threads are read from the worker itself
(``threadpoolctl.threadpool_info``), in a pool made as the lab makes it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from threadpoolctl import threadpool_info

from ssldyn.lab.workers import BLAS_THREAD_VARS, new_pool, stop_pool

pytestmark = pytest.mark.skipif(
    (os.cpu_count() or 1) < 2, reason="one core: a BLAS on one thread is the default, nothing to tell apart"
)


def _blas_threads() -> dict[str, int]:  # executed in the worker
    from threadpoolctl import threadpool_info

    return {f"{i['internal_api']}:{i['filepath']}": i["num_threads"] for i in threadpool_info()}


def _in_worker(fn):
    pool = new_pool(1)
    try:
        return pool.submit(fn).result(timeout=120)
    finally:
        stop_pool(pool)


def test_the_default_blas_would_use_every_core():  # the condition the fix is about exists here
    import numpy  # noqa: F401  (loads its BLAS)

    if any(v in os.environ for v in BLAS_THREAD_VARS):
        pytest.skip("this process sets a BLAS thread variable itself")
    assert max(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas") >= 2


def test_worker_runs_numpy_and_scipy_blas_on_one_thread(monkeypatch):
    for var in BLAS_THREAD_VARS:
        monkeypatch.delenv(var, raising=False)
    threads = _in_worker(_probe_with_scipy)
    assert threads and set(threads.values()) == {1}, threads


def _probe_with_scipy() -> dict[str, int]:  # executed in the worker
    import scipy.linalg  # noqa: F401  (scipy's own OpenBLAS, loaded in the worker)

    return _blas_threads()


def test_the_drivers_own_setting_is_kept(monkeypatch):
    for var in BLAS_THREAD_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "2")
    threads = _in_worker(_probe_with_scipy)
    openblas = [n for k, n in threads.items() if k.startswith("openblas")]
    assert openblas and set(openblas) == {2}, threads


DRIVER = textwrap.dedent(
    """
    import json, sys
    import numpy  # loaded by __main__, so a spawned worker has it before its initializer runs
    from ssldyn.lab.workers import new_pool, stop_pool

    def probe():
        import sys
        from threadpoolctl import threadpool_info
        return {"numpy_before_init": "numpy" in sys.modules,
                "threads": sorted({i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"})}

    if __name__ == "__main__":
        pool = new_pool(1)
        print(json.dumps(pool.submit(probe).result(timeout=120)))
        stop_pool(pool)
    """
)


def test_worker_limits_a_blas_its_main_module_loaded_first(tmp_path):
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    env = {k: v for k, v in os.environ.items() if k not in BLAS_THREAD_VARS}
    out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=180,
                         check=True)  # fmt: skip
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got == {"numpy_before_init": True, "threads": [1]}, (got, out.stderr[-2000:])
