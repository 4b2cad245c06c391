#!/usr/bin/python3
"""Training positions/s of our mini minigo network beside PyTorch's: the same network, loss,
optimizer and global batch on the same cores, in one run.

  /usr/bin/python3 bench/minigo_vs_pytorch.py --binary build/mlperf-dist \
      [--steps 30] [--warmup 5] [--json FILE]

Needs Debian's python3-torch (apt-get install python3-torch; not installed by launch/install-deps:
the test suite does not use it). No prepared data: minigo makes its own by self-play.

Ours: `mpirun -np N <binary> train --benchmark minigo --scale mini --max-steps warmup+steps
--progress-seconds 0 --set selfplay_games_per_generation=32 --set gnugo_games=0` for N = 1 and 2
(one OpenBLAS thread per rank, as `train` sets). The run first plays one generation of self-play
(not timed here), then trains; each step line gives that step's global positions/s and the median
over the timed steps (after the warmup steps) is reported. Once those step lines are printed the
run is stopped (SIGTERM to mpirun): after --max-steps it would only evaluate (40 games against the
reference opponent), which is not measured; a run that ends by itself exits 3 (aborted by
--max-steps), which is expected.
PyTorch: the mini net written from src/workloads/minigo/minigo_model.cpp and src/nn/conv_bn.cpp
(9x9 board, 17 input planes; stem 3x3 conv 17->32 without bias + BN + ReLU; 2 basic residual blocks
of 32 channels, conv3x3-BN-ReLU-conv3x3-BN, identity add, ReLU; policy head 1x1 conv to 2 planes +
BN + ReLU, linear 162->82; value head 1x1 conv to 1 plane + BN + ReLU, linear 81->64, ReLU, linear
64->1, value tanh), 60861 parameters as ours (checked against the count our run prints), batch norm
in training mode (eps 1e-5, running statistics at momentum 0.1 = our 0.9), the same loss
(soft-target softmax cross-entropy of the policy logits against a visit distribution plus the
squared error of tanh(value logit) against the outcome, summed and divided by the global batch),
SGD lr 0.05 momentum 0.9 weight decay 1e-4, global batch 64 (32 per rank at 2). Its inputs are
random 0/1 stone planes with a side-to-move plane of all 0 or all 1, random visit distributions
(rows summing to 1) and outcomes in {-1,+1}, generated once up front: ours samples its positions
from the self-play window and applies one of the 8 board symmetries on the host inside the step,
a cost PyTorch is spared. Configurations, each a fresh process whose thread counts are set before
torch is imported: 1 process x 1 thread; 1 x 2 threads; 2 processes x 1 thread with
DistributedDataParallel over gloo (a file store in /tmp; broadcast_buffers off: like ours, each
rank keeps its own batch-norm running statistics). Both memory layouts (NCHW, channels_last) are
timed at 1 thread and the faster one is used. Ours at 1 rank is compared with PyTorch at 1
thread, ours at 2 ranks with the best PyTorch configuration on 2 cores.
"""
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

import torch_peer

BATCH = 64
BOARD = 9
PLANES = 17
CHANNELS = 32
BLOCKS = 2
VALUE_HIDDEN = 64
MOVES = BOARD * BOARD + 1
PARAMS = 60861  # what our run prints for the mini net ("model: minigo net: ... 60861 params")

STEP_RE = re.compile(r"step \d+/\d+ \|.*\| (\d+(?:\.\d+)?) positions/s")
PARAMS_RE = re.compile(r"model: minigo net: .*?(\d+) params")


def run_ours(binary, ranks, steps, warmup):
    out_dir = tempfile.mkdtemp(prefix="minigobench_")
    cmd = ["mpirun", "--oversubscribe", "--allow-run-as-root", "--mca", "btl", "self,vader", "--bind-to", "core",
           "-np", str(ranks), binary, "train", "--benchmark", "minigo", "--scale", "mini",
           "--max-steps", str(warmup + steps), "--progress-seconds", "0", "--results-dir", out_dir,
           "--set", "selfplay_games_per_generation=32", "--set", "gnugo_games=0"]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    lines, rates, params = [], [], None
    for line in p.stdout:
        lines.append(line)
        m = PARAMS_RE.search(line)
        if m:
            params = int(m.group(1))
        m = STEP_RE.search(line)
        if m:
            rates.append(float(m.group(1)))
            if len(rates) >= warmup + steps:
                break
    stopped = False
    if p.poll() is None and len(rates) >= warmup + steps:
        p.terminate()  # the evaluation after --max-steps is not measured
        stopped = True
    try:
        rest, _ = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        rest, _ = p.communicate()
    lines.append(rest or "")
    if len(rates) < warmup + steps or (not stopped and p.returncode not in (0, 3)):
        text = "".join(lines)
        sys.exit(f"ours at {ranks} ranks: {len(rates)} step lines (exit {p.returncode})\n{text[-4000:]}")
    return statistics.median(rates[warmup:warmup + steps]), params


# ---------------------------------------------------------------- the PyTorch side (child process)
def torch_child(args):
    threads, rank, world, layout = args.threads, args.rank, args.world, args.layout
    import time
    torch = torch_peer.start_child(args)
    import torch.nn as nn
    import torch.nn.functional as F

    def conv_bn(ci, co, k):
        # our bn_momentum 0.9 keeps 0.9 of the running statistics: PyTorch's momentum 0.1
        return nn.Sequential(nn.Conv2d(ci, co, k, 1, k // 2, bias=False), nn.BatchNorm2d(co, eps=1e-5, momentum=0.1))

    class Block(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.a, self.b = conv_bn(c, c, 3), conv_bn(c, c, 3)

        def forward(self, x):
            return F.relu(self.b(F.relu(self.a(x))) + x)

    class MinigoMini(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = conv_bn(PLANES, CHANNELS, 3)
            self.tower = nn.Sequential(*[Block(CHANNELS) for _ in range(BLOCKS)])
            self.policy_conv = conv_bn(CHANNELS, 2, 1)
            self.policy_fc = nn.Linear(2 * BOARD * BOARD, MOVES)
            self.value_conv = conv_bn(CHANNELS, 1, 1)
            self.value_fc1 = nn.Linear(BOARD * BOARD, VALUE_HIDDEN)
            self.value_fc2 = nn.Linear(VALUE_HIDDEN, 1)

        def forward(self, x):
            t = self.tower(F.relu(self.stem(x)))
            p = self.policy_fc(torch.flatten(F.relu(self.policy_conv(t)), 1))
            v = self.value_fc2(F.relu(self.value_fc1(torch.flatten(F.relu(self.value_conv(t)), 1))))
            return p, v.squeeze(1)

    def loss_fn(policy, value, target_policy, target_value, global_batch):
        xent = -(target_policy * F.log_softmax(policy, dim=1)).sum()
        mse = (torch.tanh(value) - target_value).pow(2).sum()
        return (xent + mse) / global_batch

    local = BATCH // world
    n_pos = local * (args.warmup + args.steps)
    x = (torch.rand(n_pos, PLANES, BOARD, BOARD) < 0.5).float()
    x[:, PLANES - 1] = (torch.rand(n_pos) < 0.5).float()[:, None, None]  # side to move: all 0 or all 1
    tp = torch.rand(n_pos, MOVES)
    tp = tp / tp.sum(1, keepdim=True)
    tv = torch.where(torch.rand(n_pos) < 0.5, -1.0, 1.0)
    model = MinigoMini()
    n_params = sum(p.numel() for p in model.parameters())
    assert n_params == PARAMS, f"torch minigo net has {n_params} parameters, ours {PARAMS}"
    fmt = torch.channels_last if layout == "channels_last" else torch.contiguous_format
    model = model.to(memory_format=fmt)
    x = x.contiguous(memory_format=fmt)
    model.train()
    if world > 1:
        model = torch.nn.parallel.DistributedDataParallel(model, broadcast_buffers=False)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    times = []
    for s in range(args.warmup + args.steps):
        sl = slice(s * local, (s + 1) * local)
        t0 = time.perf_counter()
        policy, value = model(x[sl])
        loss = loss_fn(policy, value, tp[sl], tv[sl], BATCH)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
    times = torch_peer.slowest_step_times(torch, args, times)
    if rank == 0:
        print(json.dumps({"pos_s": BATCH / statistics.median(times[args.warmup:]), "params": n_params,
                          "loss": float(loss)}))


def main():
    args = torch_peer.parse_bench_arguments(__doc__, data_dir=False)
    if args.child:
        return torch_child(args)
    if not os.access(args.binary, os.X_OK):
        sys.exit(f"{args.binary} missing: build it first (or pass --binary)")
    script = os.path.abspath(__file__)
    load = os.getloadavg()[0]
    ours1, ours_params = run_ours(args.binary, 1, args.steps, args.warmup)
    ours2, _ = run_ours(args.binary, 2, args.steps, args.warmup)
    if ours_params is not None and ours_params != PARAMS:
        sys.exit(f"our minigo net reports {ours_params} parameters, the torch one has {PARAMS}")
    run = lambda threads, world, layout: torch_peer.run_children(script, threads, world, layout, args.steps,
                                                                args.warmup)
    rows, best_layout, torch1, torch2, best = torch_peer.peer_configurations(run, "pos_s")
    torch_peer.print_comparison(
        f"mini minigo training, global batch {BATCH}, median of {args.steps} steps after {args.warmup} "
        f"(load average {load:.2f} at the start, {os.getloadavg()[0]:.2f} at the end)", "pos/s", ours1, ours2, rows,
        torch1, torch2,
        notes=[f"parameters: ours {ours_params if ours_params is not None else '?'}, torch {best['params']}; "
               f"torch layout used: {best_layout}"],
        json_path=args.json, extra_json={"torch_layout": best_layout, "params": PARAMS})


if __name__ == "__main__":
    main()
