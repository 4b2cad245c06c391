#!/usr/bin/python3
"""Activation memory of one mini resnet training step, ours beside PyTorch's, in fp32 and bf16.

  /usr/bin/python3 bench/resnet_memory_vs_pytorch.py --bench-train build-cpu/bench/bench_train \
      [--data-dir data] [--ranks 2]

Needs Debian's python3-torch and `prepare --benchmark resnet`.

Ours: `mpirun -np R bench_train --benchmark resnet --precision P --steps 2 --warmup 1`, which prints
what one rank's model holds on its device: its activation and gradient buffers (DeviceBuffers) and
its scratch arena, both allocated once at build. PyTorch: ResNet-20 as in resnet_vs_pytorch.py, at
the same per-rank batch (global 128 / R), one forward in training mode (bf16 under torch.autocast);
what autograd keeps for backward is counted by a saved-tensors hook, each storage once, parameters
left out (ours are not counted either); both memory layouts. This is what PyTorch holds between
forward and backward, the bulk of its activation memory; the gradients it creates during backward
are not in it, while ours count our gradient buffers. So PyTorch's figure is a lower bound on its
activation memory.
"""
import argparse
import os
import re
import subprocess
import sys

from resnet_vs_pytorch import BATCH, CLASSES, resnet20  # the same network and global batch


def ours(bench_train, data_dir, ranks, precision):
    cmd = ["mpirun", "--oversubscribe", "--allow-run-as-root", "-np", str(ranks), bench_train, "--benchmark", "resnet",
           "--data-dir", data_dir, "--precision", precision, "--steps", "2", "--warmup", "1"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"bench_train failed:\n{out.stdout}\n{out.stderr}")
    m = re.search(r"memory per rank: activation buffers ([0-9.]+) MB, scratch arena ([0-9.]+) MB", out.stdout)
    if not m:
        sys.exit(f"bench_train printed no memory line:\n{out.stdout}")
    return float(m.group(1)), float(m.group(2))


def torch_saved_mb(local_batch, precision, layout):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    torch.manual_seed(0)
    fmt = torch.channels_last if layout == "channels_last" else torch.contiguous_format
    model = resnet20(nn, F).to(memory_format=fmt)
    storage = lambda t: t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()  # torch < 2
    params = {storage(p).data_ptr() for p in model.parameters()}
    x = torch.randn(local_batch, 1, 28, 28).contiguous(memory_format=fmt)
    y = torch.randint(0, CLASSES, (local_batch,))
    seen = {}

    def pack(t):
        s = storage(t)
        if s.data_ptr() not in params:
            seen[s.data_ptr()] = s.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
            logits = model(x)
        loss = F.cross_entropy(logits.float(), y, label_smoothing=0.1)
    total = sum(seen.values())
    loss.backward()  # the step runs, so what was counted is what backward used
    return total / 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench-train", required=True)
    ap.add_argument("--data-dir", default="data")
    ap.add_argument("--ranks", type=int, default=2)
    a = ap.parse_args()
    if not os.path.exists(os.path.join(a.data_dir, "resnet_mini.h5")):
        sys.exit(f"{a.data_dir}/resnet_mini.h5 missing: run `mlperf-dist prepare --benchmark resnet --scale mini`")
    local = BATCH // a.ranks
    print(f"mini resnet, batch {local} per rank ({a.ranks} ranks), MB per rank")
    print("| precision | ours: activation buffers + scratch | PyTorch: saved for backward, NCHW / channels_last |")
    print("|---|---|---|")
    for precision in ("fp32", "bf16"):
        act, scratch = ours(a.bench_train, a.data_dir, a.ranks, precision)
        nchw = torch_saved_mb(local, precision, "nchw")
        cl = torch_saved_mb(local, precision, "channels_last")
        print(f"| {precision} | {act:.1f} + {scratch:.1f} = {act + scratch:.1f} | {nchw:.1f} / {cl:.1f} |")


if __name__ == "__main__":
    main()
