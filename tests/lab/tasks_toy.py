"""Picklable top-level task functions for the executor tests (workers import this module)."""

import os

import torch


def square(x: int) -> int:
    return x * x


def worker_info(_: int) -> tuple[int, int]:
    """(process id, torch threads) of the process running the task."""
    return os.getpid(), torch.get_num_threads()


def fail_on_three(x: int) -> int:
    if x == 3:
        raise ValueError("task 3 failed")
    return x


def matmul_sum(seed: int) -> float:
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(64, 64, generator=g)
    return float((a @ a).sum())
