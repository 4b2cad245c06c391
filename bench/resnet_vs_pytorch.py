#!/usr/bin/python3
"""Training images/s of our mini resnet beside PyTorch's: the same network, loss, optimizer, global
batch and compute precision on the same cores, in one run.

  /usr/bin/python3 bench/resnet_vs_pytorch.py --binary build/mlperf-dist --data-dir data \
      [--precision fp32|bf16] [--steps 30] [--warmup 5] [--json FILE]

Needs Debian's python3-torch (apt-get install python3-torch; not installed by launch/install-deps:
the test suite does not use it) and `prepare --benchmark resnet`.

Ours: `mpirun -np N <binary> train --benchmark resnet --scale mini --precision P --max-steps
warmup+steps --progress-seconds 0` for N = 1 and 2 (one OpenBLAS thread per rank, as `train` sets);
each step line gives that step's global images/s; the median over the timed steps is reported.
PyTorch: ResNet-20 written from src/workloads/resnet/resnet_model.cpp (3x3 stem 16 ch, three
stages of three basic blocks at 16/32/64 channels, stride 2 and a 1x1 projection entering stages 2
and 3, batch norm in training mode, global average pool, fully connected to 10 classes),
cross-entropy with label smoothing 0.1, SGD momentum 0.9, weight decay 4e-4, global batch 128, on
28x28x1 inputs drawn at random (the step's work does not depend on the pixels; ours also crops and
flips on the host inside the step, a cost PyTorch is spared). bf16: PyTorch's own mixed precision,
the step's forward under torch.autocast("cpu", bfloat16) (convolutions and the classifier in bf16
on oneDNN, fp32 weights and optimizer), as ours keeps fp32 master weights. Configurations, each a
fresh process whose thread counts are set before torch is imported: 1 process x 1 thread; 1 x 2
threads; 2 processes x 1 thread with DistributedDataParallel over gloo (a file store in /tmp). Both
memory layouts (NCHW, channels_last) are timed at 1 thread and the faster one is used. Ours at
1 rank is compared with PyTorch at 1 thread, ours at 2 ranks with the best PyTorch configuration on
2 cores.
"""
import json
import os
import statistics
import sys

import torch_peer

BATCH = 128
CLASSES = 10


def resnet20(nn, F):
    """Our mini ResNet-20 as a PyTorch module (also used by resnet_memory_vs_pytorch.py)."""
    conv_bn, Block = torch_peer.resnet_basic_parts(nn, F)

    class ResNet20(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = conv_bn(1, 16, 3, 1, 1)
            blocks, ci = [], 16
            for stage, co in enumerate((16, 32, 64)):
                for b in range(3):
                    blocks.append(Block(ci, co, 2 if stage > 0 and b == 0 else 1))
                    ci = co
            self.blocks = nn.Sequential(*blocks)
            self.fc = nn.Linear(64, CLASSES)

        def forward(self, x):
            f = self.blocks(F.relu(self.stem(x)))
            return self.fc(f.mean((2, 3)))

    return ResNet20()


# ---------------------------------------------------------------- the PyTorch side (child process)
def torch_child(args):
    rank, world, layout = args.rank, args.world, args.layout
    torch = torch_peer.start_child(args)
    import torch.nn as nn
    import torch.nn.functional as F

    local = BATCH // world
    fmt = torch.channels_last if layout == "channels_last" else torch.contiguous_format
    model = resnet20(nn, F).to(memory_format=fmt)
    if world > 1:
        model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=4e-4)
    n_img = local * (args.warmup + args.steps)
    imgs = torch.randn(n_img, 1, 28, 28).contiguous(memory_format=fmt)
    labels = torch.randint(0, CLASSES, (n_img,))
    bf16 = args.precision == "bf16"

    def step(s):
        x, y = imgs[s * local:(s + 1) * local], labels[s * local:(s + 1) * local]
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            logits = model(x)
        loss = F.cross_entropy(logits.float(), y, label_smoothing=0.1) / world
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    times = torch_peer.slowest_step_times(torch, args, torch_peer.timed_steps(args, step))
    if rank == 0:
        print(json.dumps({"img_s": BATCH / statistics.median(times[args.warmup:])}))


def main():
    import argparse
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--precision", choices=("fp32", "bf16"), default="fp32")
    known, rest = pre.parse_known_args()
    sys.argv = [sys.argv[0], *rest]
    args = torch_peer.parse_bench_arguments(__doc__)
    args.precision = known.precision
    if args.child:
        return torch_child(args)
    if not os.path.exists(os.path.join(args.data_dir, "resnet_mini.h5")):
        sys.exit(f"{args.data_dir}/resnet_mini.h5 missing: run `mlperf-dist prepare --benchmark resnet --scale mini`")
    script = os.path.abspath(__file__)
    load = os.getloadavg()[0]
    ours1 = torch_peer.run_ours_train(args.binary, "resnet", args.data_dir, 1, args.steps, args.warmup,
                                      ("--precision", args.precision))
    ours2 = torch_peer.run_ours_train(args.binary, "resnet", args.data_dir, 2, args.steps, args.warmup,
                                      ("--precision", args.precision))
    run = lambda threads, world, layout: torch_peer.run_children(
        script, threads, world, layout, args.steps, args.warmup, ("--precision", args.precision))
    rows, _, torch1, torch2, _ = torch_peer.peer_configurations(run, "img_s")
    torch_peer.print_comparison(f"mini resnet training in {args.precision}, global batch {BATCH}, median of "
                                f"{args.steps} steps after {args.warmup} (load average {load:.2f} at the start, "
                                f"{os.getloadavg()[0]:.2f} at the end)", "img/s", ours1, ours2, rows, torch1, torch2,
                                json_path=args.json)


if __name__ == "__main__":
    main()
