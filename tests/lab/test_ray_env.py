"""The environment the Ray executor gives its workers (no Ray needed)."""

from __future__ import annotations

import os
import sys

from ssldyn.lab.executors import ray_worker_env
from ssldyn.lab.workers import BLAS_THREAD_VARS


def test_workers_run_blas_on_the_torch_threads(monkeypatch):
    for var in ("SSLDYN_THREADS", "SSLDYN_PLUGINS", *BLAS_THREAD_VARS):
        monkeypatch.delenv(var, raising=False)
    env = ray_worker_env()
    assert env["SSLDYN_THREADS"] == "1" and env["SSLDYN_PLUGINS"] == ""
    assert {env[v] for v in BLAS_THREAD_VARS} == {"1"} and "OPENBLAS_NUM_THREADS" in BLAS_THREAD_VARS
    monkeypatch.setenv("SSLDYN_THREADS", "3")
    assert {ray_worker_env()[v] for v in ("SSLDYN_THREADS", *BLAS_THREAD_VARS)} == {"3"}
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "2")  # the driver's own choice is passed on
    env = ray_worker_env()
    assert env["OPENBLAS_NUM_THREADS"] == "2" and env["MKL_NUM_THREADS"] == "3"


def test_workers_get_the_plugins_and_the_import_path(monkeypatch):
    monkeypatch.setenv("SSLDYN_PLUGINS", "my_module,other")
    env = ray_worker_env()
    assert env["SSLDYN_PLUGINS"] == "my_module,other"
    paths = env["PYTHONPATH"].split(os.pathsep)
    assert paths and all(os.path.isdir(p) for p in paths)
    assert [p for p in sys.path if p and os.path.isdir(p)] == paths
