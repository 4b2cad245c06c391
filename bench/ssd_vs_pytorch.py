#!/usr/bin/python3
"""Training images/s of our mini SSD beside PyTorch's: the same network, loss, optimizer and global
batch on the same real images and the same cores, in one run.

  /usr/bin/python3 bench/ssd_vs_pytorch.py --binary build/mlperf-dist --data-dir data \
      [--steps 30] [--warmup 5] [--json FILE]

Needs Debian's python3-torch and python3-h5py (apt-get install python3-torch python3-h5py; not
installed by launch/install-deps: the test suite does not use them) and `prepare --benchmark ssd`.

Ours: `mpirun -np N <binary> train --benchmark ssd --scale mini --max-steps warmup+steps
--progress-seconds 0` for N = 1 and 2 (one OpenBLAS thread per rank, as `train` sets); each step
line gives that step's global images/s; the median over the timed steps is reported.
PyTorch: ssd_mini written from src/workloads/ssd/ssd_model.cpp (stem 3x3/2 16 ch, basic blocks
to 32 and 64 channels at stride 2 with 1x1 projections, two extras 1x1->32, 3x3/2->64, 3x3 heads
without bias, 846 priors), batch norm in training mode, the same loss (priors matched to boxes at
IoU 0.5 plus each box's best prior, offsets with variances 0.1/0.2, smooth-L1 on positives,
cross-entropy on positives and the 3x hardest negatives, per image over its positives, summed and
divided by the global batch; matching vectorized in torch inside the step, as ours does it inside
the step), SGD momentum 0.9, weight decay 5e-4, global batch 64, images from the prepared file
with their boxes (no crop or flip: ours crops and flips on the host inside the step, a cost PyTorch
is spared). Configurations, each a fresh process whose thread counts are set before torch is
imported: 1 process x 1 thread; 1 x 2 threads; 2 processes x 1 thread with DistributedDataParallel
over gloo (a file store in /tmp). Both memory layouts (NCHW, channels_last) are timed at 1 thread
and the faster one is used. Ours at 1 rank is compared with PyTorch at 1 thread, ours at 2 ranks
with the best PyTorch configuration on 2 cores.
"""
import json
import os
import statistics
import sys

import torch_peer

BATCH = 64
CLASSES = 11


# ---------------------------------------------------------------- the PyTorch side (child process)
def torch_child(args):
    threads, rank, world, layout = args.threads, args.rank, args.world, args.layout
    import h5py
    torch = torch_peer.start_child(args)
    import torch.nn as nn
    import torch.nn.functional as F

    conv_bn, Block = torch_peer.resnet_basic_parts(nn, F)

    class SsdMini(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = conv_bn(1, 16, 3, 2, 1)
            self.blocks = nn.Sequential(Block(16, 32, 2), Block(32, 64, 2))
            self.extras = nn.ModuleList([nn.Sequential(conv_bn(64, 32, 1, 1, 0), nn.ReLU(), conv_bn(32, 64, 3, 2, 1),
                                                       nn.ReLU()) for _ in range(2)])
            self.boxes = [4, 6, 6]
            self.conf = nn.ModuleList([nn.Conv2d(64, a * CLASSES, 3, 1, 1, bias=False) for a in self.boxes])
            self.loc = nn.ModuleList([nn.Conv2d(64, a * 4, 3, 1, 1, bias=False) for a in self.boxes])

        def forward(self, x):
            f = self.blocks(F.relu(self.stem(x)))
            maps = [f]
            for e in self.extras:
                maps.append(e(maps[-1]))
            n = x.shape[0]
            conf = torch.cat([c(m).permute(0, 2, 3, 1).reshape(n, -1, CLASSES) for c, m in zip(self.conf, maps)], 1)
            loc = torch.cat([l(m).permute(0, 2, 3, 1).reshape(n, -1, 4) for l, m in zip(self.loc, maps)], 1)
            return conf, loc

    def priors():
        out = []
        for size, (s, s2, ars) in zip((12, 6, 3), ((0.12, 0.28, [2.0]), (0.28, 0.5, [2.0, 3.0]), (0.5, 0.72, [2.0, 3.0]))):
            wh = [(s, s), ((s * s2) ** 0.5,) * 2]
            for r in ars:
                q = r ** 0.5
                wh += [(s * q, s / q), (s / q, s * q)]
            for i in range(size):
                for j in range(size):
                    for w, h in wh:
                        out.append([(j + 0.5) / size, (i + 0.5) / size, min(w, 1.0), min(h, 1.0)])
        return torch.tensor(out)

    P = priors()
    assert P.shape[0] == 846
    pxy = torch.cat([P[:, :2] - P[:, 2:] / 2, P[:, :2] + P[:, 2:] / 2], 1)

    def loss_fn(conf, loc, gts, global_batch):
        total = conf.new_zeros(())
        for i, (boxes, labels) in enumerate(gts):
            lt = torch.zeros(P.shape[0], dtype=torch.long)
            tgt = torch.zeros(P.shape[0], 4)
            if len(boxes):
                lo = torch.max(pxy[:, None, :2], boxes[None, :, :2])
                hi = torch.min(pxy[:, None, 2:], boxes[None, :, 2:])
                inter = (hi - lo).clamp(min=0).prod(2)
                area_p = (pxy[:, 2:] - pxy[:, :2]).prod(1)[:, None]
                area_g = (boxes[:, 2:] - boxes[:, :2]).prod(1)[None, :]
                iou = inter / (area_p + area_g - inter)
                best_iou, best_gt = iou.max(1)
                best_prior = iou.argmax(0)
                best_gt[best_prior] = torch.arange(len(boxes))
                best_iou[best_prior] = 1.0
                matched = best_iou >= 0.5
                lt[matched] = labels[best_gt[matched]]
                g = boxes[best_gt]
                gc, gw = (g[:, :2] + g[:, 2:]) / 2, (g[:, 2:] - g[:, :2])
                tgt = torch.cat([(gc - P[:, :2]) / (P[:, 2:] * 0.1), torch.log(gw.clamp(min=1e-6) / P[:, 2:]) / 0.2], 1)
            pos = lt > 0
            npos = int(pos.sum())
            if npos == 0:
                continue
            ce = F.cross_entropy(conf[i], lt, reduction="none")
            neg_ce = ce.detach().clone()
            neg_ce[pos] = -1.0
            k = min(3 * npos, P.shape[0] - npos)
            hard = neg_ce.topk(k).indices
            l_loc = F.smooth_l1_loss(loc[i][pos], tgt[pos], reduction="sum", beta=1.0)
            total = total + (l_loc + ce[pos].sum() + ce[hard].sum()) / npos
        return total / global_batch

    f = h5py.File(os.path.join(args.data_dir, "ssd_mini.h5"), "r")
    g = f["train"]
    mean, std = float(g.attrs["mean"]), float(g.attrs["std"])
    local = BATCH // world
    n_img = local * (args.warmup + args.steps)
    start = rank * n_img
    imgs = torch.from_numpy(g["images"][start:start + n_img].astype("float32")).permute(0, 3, 1, 2) / 255.0
    imgs = (imgs - mean) / std
    first = g["inst_first"][start:start + n_img + 1]
    all_boxes, all_cls = g["boxes"][first[0]:first[-1]], g["classes"][first[0]:first[-1]]
    gts = []
    for i in range(n_img):
        b = torch.from_numpy(all_boxes[first[i] - first[0]:first[i + 1] - first[0]].copy())
        b = torch.cat([b[:, :2], b[:, :2] + b[:, 2:]], 1) / 96.0
        gts.append((b, torch.from_numpy(all_cls[first[i] - first[0]:first[i + 1] - first[0]].astype("int64"))))
    model = SsdMini()
    fmt = torch.channels_last if layout == "channels_last" else torch.contiguous_format
    model = model.to(memory_format=fmt)
    imgs = imgs.contiguous(memory_format=fmt)
    if world > 1:
        model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    import time
    times = []
    for s in range(args.warmup + args.steps):
        x = imgs[s * local:(s + 1) * local]
        t0 = time.perf_counter()
        conf, loc = model(x)
        loss = loss_fn(conf, loc, gts[s * local:(s + 1) * local], BATCH)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
    times = torch_peer.slowest_step_times(torch, args, times)
    if rank == 0:
        print(json.dumps({"img_s": BATCH / statistics.median(times[args.warmup:])}))


def main():
    args = torch_peer.parse_bench_arguments(__doc__)
    if args.child:
        return torch_child(args)
    if not os.path.exists(os.path.join(args.data_dir, "ssd_mini.h5")):
        sys.exit(f"{args.data_dir}/ssd_mini.h5 missing: run `mlperf-dist prepare --benchmark ssd --scale mini`")
    script = os.path.abspath(__file__)
    load = os.getloadavg()[0]
    ours1 = torch_peer.run_ours_train(args.binary, "ssd", args.data_dir, 1, args.steps, args.warmup)
    ours2 = torch_peer.run_ours_train(args.binary, "ssd", args.data_dir, 2, args.steps, args.warmup)
    run = lambda threads, world, layout: torch_peer.run_children(script, threads, world, layout, args.steps,
                                                                args.warmup, ("--data-dir", args.data_dir))
    rows, _, torch1, torch2, _ = torch_peer.peer_configurations(run, "img_s")
    torch_peer.print_comparison(f"mini ssd training, global batch {BATCH}, median of {args.steps} steps after "
                                f"{args.warmup} (load average {load:.2f} at the start, {os.getloadavg()[0]:.2f} at "
                                f"the end)", "img/s", ours1, ours2, rows, torch1, torch2, json_path=args.json)


if __name__ == "__main__":
    main()
