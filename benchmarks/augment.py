"""Batched augmentations (:mod:`ssldyn.data.augment`) vs one call per image.

Prints one JSON line: wall time (median of ``--repeats``) to make views of ``--n`` MNIST-sized
images ``(1, 28, 28)`` with the App. E.3 ``RandomResizedCrop`` and with ``SimCLRAugment``, batched
(one call) and per image (a Python loop of single-image calls, the torchvision-style baseline),
and the speed-up of batching (target >= 10x for the crop).

Usage: python benchmarks/augment.py [--n 512] [--repeats 3] [--threads N] [--device cpu|cuda]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time

import torch

from ssldyn.data.augment import RandomResizedCrop, SimCLRAugment


def _time(fn, repeats: int, device: torch.device) -> float:
    ts = []
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize()
        t = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=512)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    dev = torch.device(a.device)
    x = torch.rand(a.n, 1, 28, 28, device=dev)
    out = {
        "bench": "augment",
        "n": a.n,
        "threads": a.threads,
        "device": str(dev),
        "python": platform.python_version(),
        "torch": torch.__version__,
    }
    for name, aug in (("crop", RandomResizedCrop()), ("simclr", SimCLRAugment())):
        g = torch.Generator().manual_seed(0)
        aug(x[:8], g)  # warm-up
        batched = _time(lambda aug=aug, g=g: aug(x, g), a.repeats, dev)
        loop = _time(lambda aug=aug, g=g: [aug(x[i : i + 1], g) for i in range(a.n)], a.repeats, dev)
        out[f"{name}_batched_s"] = round(batched, 5)
        out[f"{name}_per_image_s"] = round(loop, 5)
        out[f"{name}_speedup"] = round(loop / batched, 2)
    out["target_crop_speedup"] = 10.0
    out["pass"] = out["crop_speedup"] >= 10.0
    print(json.dumps(out))


if __name__ == "__main__":
    main()
