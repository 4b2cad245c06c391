#!/usr/bin/python3
"""Training images/s of our mini Mask R-CNN beside PyTorch's: the same network, losses, optimizer
and global batch on the same real images and the same cores, in one run.

  /usr/bin/python3 bench/maskrcnn_vs_pytorch.py --binary build/mlperf-dist --data-dir data \
      [--steps 30] [--warmup 5] [--json FILE]

Needs Debian's python3-torch and python3-h5py (apt-get install python3-torch python3-h5py; not
installed by launch/install-deps: the test suite does not use them) and `prepare --benchmark
maskrcnn`. torchvision is not needed: RoIAlign and NMS are written below in plain torch.

Ours: `mpirun -np N <binary> train --benchmark maskrcnn --scale mini --max-steps warmup+steps
--progress-seconds 0` for N = 1 and 2 (one OpenBLAS thread per rank, as `train` sets); each step
line gives that step's global images/s; the median over the timed steps is reported. A run stopped
by --max-steps evaluates the whole eval set afterwards (a minute), so mpirun is ended once the
step lines are in.
PyTorch: maskrcnn_mini written from src/workloads/maskrcnn (maskrcnn_model.cpp: stem 3x3/2 16 ch,
basic blocks to 32 and 64 ch at stride 2 with 1x1 projections, one 12x12x64 map at stride 8,
batch norm in training mode; RPN 3x3 conv + bias + ReLU, 1x1 objectness for 9 anchors (16/32/64 px
x ratios 0.5/1/2) and 1x1 deltas; box head RoIAlign 7x7 (sampling ratio 2, aligned false), fc6 256,
fc7 256, 11 class logits, 44 class-specific deltas; mask head RoIAlign 14x14, two 3x3 32-ch convs
+ bias + ReLU, 2x2/2 transposed conv + bias + ReLU, 1x1 to 11 classes at 28x28; the same
initialisation), and the same step (maskrcnn_step.cpp, rcnn_boxes.cpp) inside the timed step, as
ours does it: images normalised and flipped at random, instance masks decoded from their RLE;
RPN targets (anchors more than 0 px outside the image ignored, IoU 0.7 / 0.3 plus each box's best
anchors, 256 sampled 1:1), BCE + smooth-L1 (beta 1/9) over the sample count; proposals: the 1000
anchors of highest objectness decoded (size deltas clamped at log(1000/16)), clipped, NMS at 0.7,
at most 1000 kept; RoIs: proposals plus the ground truth, IoU 0.5, 64 sampled with at most 16
foreground; softmax cross-entropy over the image's RoIs and smooth-L1 (beta 1, weights 10/10/5/5)
of the foreground's own-class deltas over the same count; mask targets: the matched instance's
mask RoIAligned to 28x28 (adaptive sampling ratio, aligned false) and thresholded at 0.5; per-pixel
BCE of the RoI's own class channel over the image's foreground pixels; every loss per image,
summed, over the global batch; SGD momentum 0.9, weight decay 1e-4 on weights only, global batch
32, batch norm over each process's share as ours does per rank.
Where PyTorch's side differs: RoIAlign is two batched GEMMs with the separable bilinear weights of
each bin's samples, each image's RoIs padded to the most any image has (RoIAlign's values: checked
against a transcription of kernels/cpu/roi_align.cpp; autograd gives its backward); NMS computes
each image's whole IoU matrix, then one greedy pass vectorized over the images (the boxes ours
keeps, but all K^2 IoUs where ours skips suppressed boxes: the child reports its box-logic time,
printed under the title); targets are computed for every anchor and candidate and masked rather
than for the sampled ones only; samples and flips are drawn from torch's generator (other anchors,
RoIs and flips than ours, by the same rules), the images are the file's first ones (ours: the
epoch's permutation); the learning rate stays at ours' first-step 0.004 (ours warms up from it: the
same work); ours' max_masks cap is left out (it binds at neither 1 nor 2 ranks: 16 foreground RoIs
per image at most, a share of 16 or 25).
Configurations, each a fresh process whose thread counts are set before torch is imported: 1
process x 1 thread; 1 x 2 threads; 2 processes x 1 thread with DistributedDataParallel over gloo (a
file store in /tmp). Both memory layouts (NCHW, channels_last) are timed at 1 thread and the faster
one is used. Ours at 1 rank is compared with PyTorch at 1 thread, ours at 2 ranks with the best
PyTorch configuration on 2 cores.
"""
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile

import torch_peer

BATCH = 32
CLASSES = 11
SIZE = 96            # image side, pixels
STRIDE = 8           # of the one feature map
STEP_LINE = re.compile(r"step \d+/\d+ \|.*\| (\d+(?:\.\d+)?) img/s")


def run_ours(binary, data_dir, ranks, steps, warmup):
    out_dir = tempfile.mkdtemp(prefix="maskrcnnbench_")
    cmd = ["mpirun", "--oversubscribe", "--allow-run-as-root", "--mca", "btl", "self,vader", "--bind-to", "core",
           "-np", str(ranks), binary, "train", "--benchmark", "maskrcnn", "--scale", "mini", "--data-dir", data_dir,
           "--max-steps", str(warmup + steps), "--progress-seconds", "0", "--results-dir", out_dir]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    rates, tail = [], []
    for line in p.stdout:
        tail = (tail + [line])[-40:]
        m = STEP_LINE.search(line)
        if m:
            rates.append(float(m.group(1)))
        if len(rates) == warmup + steps:
            p.terminate()  # mpirun ends its ranks: the evaluation after the last step is not wanted
            break
    p.communicate()
    if len(rates) < warmup + steps:
        sys.exit(f"ours at {ranks} ranks: {len(rates)} step lines (exit {p.returncode})\n{''.join(tail)}")
    return statistics.median(rates[warmup:warmup + steps])


# ---------------------------------------------------------------- the PyTorch side (child process)
def torch_child(args):
    import time
    import h5py
    import numpy as np
    torch = torch_peer.start_child(args)
    import torch.nn as nn
    import torch.nn.functional as F
    rank, world, local = args.rank, args.world, BATCH // args.world
    fmt = torch.channels_last if args.layout == "channels_last" else torch.contiguous_format
    host_seconds = [0.0]  # the step's box logic (no gradient), for the report

    conv_bn, Block = torch_peer.resnet_basic_parts(nn, F)

    # ---- box logic (rcnn_boxes.cpp), boxes (x1, y1, x2, y2) in pixels, batched over images
    def anchors_for(fh, fw):  # [fh * fw * 9, 4] in the order (y, x, a), a ratio-major as ours
        half = torch.tensor([[0.5 * s / r ** 0.5, 0.5 * s * r ** 0.5] for r in (0.5, 1.0, 2.0) for s in (16, 32, 64)],
                            dtype=torch.float64)
        ys, xs = torch.meshgrid(torch.arange(fh, dtype=torch.float64), torch.arange(fw, dtype=torch.float64),
                                indexing="ij")
        c = torch.stack([xs, ys], -1).reshape(-1, 1, 2).add(0.5).mul(STRIDE)
        return torch.cat([c - half, c + half], -1).reshape(-1, 4).float()

    def iou(a, b):  # [..., n, 4] x [..., m, 4] -> [..., n, m]
        lt = torch.max(a[..., :, None, :2], b[..., None, :, :2])
        rb = torch.min(a[..., :, None, 2:], b[..., None, :, 2:])
        inter = (rb - lt).clamp(min=0).prod(-1)
        area_a = (a[..., 2] - a[..., 0]) * (a[..., 3] - a[..., 1])
        area_b = (b[..., 2] - b[..., 0]) * (b[..., 3] - b[..., 1])
        return inter / (area_a[..., :, None] + area_b[..., None, :] - inter)

    def encode(ref, t, w):
        rw, rh = ref[..., 2] - ref[..., 0], ref[..., 3] - ref[..., 1]
        tw, th = t[..., 2] - t[..., 0], t[..., 3] - t[..., 1]
        return torch.stack([w[0] * ((t[..., 0] + 0.5 * tw) - (ref[..., 0] + 0.5 * rw)) / rw,
                            w[1] * ((t[..., 1] + 0.5 * th) - (ref[..., 1] + 0.5 * rh)) / rh,
                            w[2] * torch.log(tw / rw), w[3] * torch.log(th / rh)], -1)

    def decode(ref, d):  # RPN weights (1, 1, 1, 1)
        rw, rh = ref[..., 2] - ref[..., 0], ref[..., 3] - ref[..., 1]
        cx, cy = ref[..., 0] + 0.5 * rw + d[..., 0] * rw, ref[..., 1] + 0.5 * rh + d[..., 1] * rh
        bw = torch.exp(d[..., 2].clamp(max=math.log(1000 / 16))) * rw
        bh = torch.exp(d[..., 3].clamp(max=math.log(1000 / 16))) * rh
        return torch.stack([cx - 0.5 * bw, cy - 0.5 * bh, cx + 0.5 * bw, cy + 0.5 * bh], -1)

    def sample(mask, k):  # at most k (an int or one per row) of each row's True entries, uniformly
        r = torch.rand(mask.shape).masked_fill(~mask, 2.0)
        rank_of = r.argsort(1).argsort(1)
        return mask & (rank_of < torch.as_tensor(k).reshape(-1, 1))

    def nms(boxes, thr):  # boxes [N, K, 4] by descending score -> kept [N, K] (greedy, IoU > thr suppresses)
        N, K = boxes.shape[:2]
        upper = torch.ones(K, K, dtype=torch.bool).triu(1)
        over = torch.empty(N, K, K, dtype=torch.bool)
        for n in range(N):  # one image's IoU matrix at a time: [N, K, K] floats would be 128 MB
            x1, y1, x2, y2 = boxes[n].unbind(-1)
            area = (x2 - x1) * (y2 - y1)
            iw = torch.min(x2.expand(K, K), x2[:, None]).sub_(torch.max(x1.expand(K, K), x1[:, None])).clamp_(min=0)
            ih = torch.min(y2.expand(K, K), y2[:, None]).sub_(torch.max(y1.expand(K, K), y1[:, None])).clamp_(min=0)
            inter = iw.mul_(ih)
            torch.gt(inter, (area[:, None] + area[None] - inter).mul_(thr), out=over[n])
            over[n] &= upper
        suppressed = torch.zeros(N, K, dtype=torch.bool)
        for i in range(K):  # box i's fate is settled once the boxes before it are: the greedy order
            suppressed |= over[:, i] & ~suppressed[:, i:i + 1]
        return ~suppressed

    def bilinear(pos, size):
        """RoIAlign's bilinear weights of sample coordinates pos [...] along an axis of `size` pixels:
        [..., size], two non-zero (0 outside [-1, size]; clamped to the edge pixel within)."""
        y = pos.clamp(0, size - 1)
        lo = y.floor().clamp(max=size - 2)
        valid = (pos >= -1) & (pos <= size)
        w = pos.new_zeros(*pos.shape, size)
        w.scatter_(-1, lo.long()[..., None], ((1 - (y - lo)) * valid)[..., None])
        return w.scatter_(-1, lo.long()[..., None] + 1, ((y - lo) * valid)[..., None])

    def roi_align(feat, img, boxes, counts, P):
        """RoIAlign (sampling ratio 2, aligned false, scale 1/STRIDE) of RoIs sorted by image -> [R, P
        (y), C, P (x)]. Bilinear sampling is separable: each bin's mean of its 2x2 samples is
        Ay F Ax^T with Ay [P, H], Ax [P, W] the mean bilinear weights of its sample rows and columns;
        two batched GEMMs, each image's RoIs padded to the most any image has; autograd gives dF."""
        N, C, H, W = feat.shape
        slot = torch.arange(len(img)) - (counts.cumsum(0) - counts)[img]
        K = int(counts.max())
        pad = boxes.new_tensor([0.0, 0.0, STRIDE, STRIDE]).repeat(N, K, 1)
        pad[img, slot] = boxes
        x1, y1 = pad[..., 0] / STRIDE, pad[..., 1] / STRIDE
        rw = (pad[..., 2] / STRIDE - x1).clamp(min=1.0)  # Detectron's malformed RoI -> 1x1
        rh = (pad[..., 3] / STRIDE - y1).clamp(min=1.0)
        t = (torch.arange(2 * P) + 0.5) / 2  # bin p's samples at p + 0.25, p + 0.75 (in bins)
        ax = bilinear(x1[..., None] + t * (rw / P)[..., None], W).reshape(N, K, P, 2, W).mean(3)
        ay = bilinear(y1[..., None] + t * (rh / P)[..., None], H).reshape(N, K, P, 2, H).mean(3)
        s = torch.bmm(ay.reshape(N, K * P, H), feat.permute(0, 2, 1, 3).reshape(N, H, C * W))
        s = torch.bmm(s.reshape(N * K, P * C, W), ax.reshape(N * K, P, W).transpose(1, 2))
        return s.reshape(N * K, P, C, P)[img * K + slot]

    def mask_targets(masks, boxes, M=28):
        """masks [F, H, W] 0/1, boxes [F, 4] pixels -> [F, M, M] 0/1: RoIAlign at scale 1 with the
        adaptive sampling ratio (ceil(bin size) samples per bin side, as ours), by the largest grid
        with the surplus samples weighted 0, then >= 0.5."""
        x1, y1 = boxes[:, 0], boxes[:, 1]
        bw, bh = (boxes[:, 2] - x1).clamp(min=1.0) / M, (boxes[:, 3] - y1).clamp(min=1.0) / M
        gx, gy = torch.ceil(bw), torch.ceil(bh)
        G = int(max(gx.max(), gy.max()))
        i, p = torch.arange(G), torch.arange(M)
        ax = bilinear(x1[:, None, None] + (p[:, None] + (i + 0.5) / gx[:, None, None]) * bw[:, None, None], SIZE)
        ay = bilinear(y1[:, None, None] + (p[:, None] + (i + 0.5) / gy[:, None, None]) * bh[:, None, None], SIZE)
        ax = (ax * ((i < gx[:, None]) / gx[:, None])[:, None, :, None]).sum(2)  # [F, M, W]
        ay = (ay * ((i < gy[:, None]) / gy[:, None])[:, None, :, None]).sum(2)
        return (ay @ masks @ ax.transpose(1, 2) >= 0.5).float()

    class MaskRcnnMini(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = conv_bn(1, 16, 3, 2, 1)
            self.blocks = nn.Sequential(Block(16, 32, 2), Block(32, 64, 2))
            self.rpn_conv = nn.Conv2d(64, 64, 3, 1, 1)
            self.rpn_obj, self.rpn_deltas = nn.Conv2d(64, 9, 1), nn.Conv2d(64, 36, 1)
            self.fc6, self.fc7 = nn.Linear(64 * 49, 256), nn.Linear(256, 256)
            self.cls, self.bbox = nn.Linear(256, CLASSES), nn.Linear(256, 4 * CLASSES)
            self.mask_convs = nn.ModuleList([nn.Conv2d(64, 32, 3, 1, 1), nn.Conv2d(32, 32, 3, 1, 1)])
            self.deconv, self.mask_pred = nn.ConvTranspose2d(32, 32, 2, 2), nn.Conv2d(32, CLASSES, 1)
            # Ours' initialisation (maskrcnn-benchmark's): He-normal fan_out backbone; normal 0.01 for
            # the RPN and the class logits, 0.001 box deltas; fc6/fc7 uniform sqrt(3 / fan_in).
            for m in self.modules():
                if isinstance(m, nn.Conv2d) and m.bias is None:
                    nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            for m, std in ((self.rpn_conv, 0.01), (self.rpn_obj, 0.01), (self.rpn_deltas, 0.01), (self.cls, 0.01),
                           (self.bbox, 0.001), (self.mask_convs[0], (2 / 288) ** 0.5),
                           (self.mask_convs[1], (2 / 288) ** 0.5), (self.deconv, (2 / 128) ** 0.5),
                           (self.mask_pred, (2 / CLASSES) ** 0.5)):
                nn.init.normal_(m.weight, std=std)
                nn.init.zeros_(m.bias)
            for m in (self.fc6, self.fc7):
                nn.init.uniform_(m.weight, -(3 / m.in_features) ** 0.5, (3 / m.in_features) ** 0.5)
                nn.init.zeros_(m.bias)

        def forward(self, x, gt, gt_valid, gt_labels, masks, inst_of):
            """One step's losses (maskrcnn_step.cpp), each per image, summed over the process's images.
            gt [n, G, 4] padded, gt_valid [n, G], gt_labels [n, G], masks [instances, H, W], inst_of
            [n, G]: the instance of each box in masks."""
            n = x.shape[0]
            feat = self.blocks(F.relu(self.stem(x)))
            h = F.relu(self.rpn_conv(feat))
            obj = self.rpn_obj(h).permute(0, 2, 3, 1).reshape(n, -1)           # [n, cells * A]: anchors' order
            deltas = self.rpn_deltas(h).permute(0, 2, 3, 1).reshape(n, -1, 4)  # [n, cells * A, 4]
            t0 = time.perf_counter()
            with torch.no_grad():
                # RPN targets.
                ov = iou(anchors, gt).masked_fill(~gt_valid[:, None, :], -1.0)  # [n, AN, G]
                gt_best = ov.masked_fill(~visible[None, :, None], -1.0).amax(1, keepdim=True)
                best, match = ov.max(2)
                pos = visible & ((best >= 0.7) | ((ov == gt_best) & (gt_best > 0)).any(2))
                neg = visible & ~pos & (best < 0.3)
                pos = sample(pos, 128)
                neg = sample(neg, 256 - pos.sum(1))
                picked = (pos | neg).float() / (pos | neg).sum(1, keepdim=True).clamp(min=1)
                rpn_t = encode(anchors, gt.gather(1, match[..., None].expand(-1, -1, 4)), (1, 1, 1, 1))
                # Proposals.
                k = min(1000, anchors.shape[0])
                top = obj.detach().topk(k, 1).indices
                props = decode(anchors[top], deltas.detach().gather(1, top[..., None].expand(-1, -1, 4))).clamp(0, SIZE)
                kept = nms(props, 0.7)
                # RoIs: proposals plus the ground truth, 64 per image, at most 16 foreground.
                cand = torch.cat([props, gt], 1)
                cvalid = torch.cat([kept, gt_valid], 1)
                ov = iou(cand, gt).masked_fill(~gt_valid[:, None, :], -1.0)
                best, match = ov.max(2)
                fg = sample(cvalid & (best >= 0.5), 16)
                bg = sample(cvalid & (best < 0.5), 64 - fg.sum(1))
                img, j = (fg | bg).nonzero(as_tuple=True)  # sorted by image
                rois, is_fg, g = cand[img, j], fg[img, j], match[img, j]
                labels = torch.where(is_fg, gt_labels[img, g], torch.zeros_like(g))
                counts = torch.bincount(img, minlength=n)
                roi_w = 1.0 / counts[img].float()
                box_t = encode(rois[is_fg], gt[img[is_fg], g[is_fg]], (10, 10, 5, 5))
                mimg, mrois, mlabels = img[is_fg], rois[is_fg], labels[is_fg]
                mcounts = torch.bincount(mimg, minlength=n)
                mask_t = mask_targets(masks[inst_of[mimg, g[is_fg]]], mrois)
                mask_w = 1.0 / (mcounts[mimg].float() * mask_t[0].numel())
            host_seconds[0] += time.perf_counter() - t0
            loss = (F.binary_cross_entropy_with_logits(obj, pos.float(), reduction="none") * picked).sum()
            loss = loss + (F.smooth_l1_loss(deltas, rpn_t, reduction="none", beta=1 / 9).sum(2) * pos * picked).sum()
            # Box head.
            # fc6 reads the pooled features as (y, c, x): a fixed permutation of ours' (y, x, c), the same layer.
            y = F.relu(self.fc7(F.relu(self.fc6(roi_align(feat, img, rois, counts, 7).flatten(1)))))
            loss = loss + (F.cross_entropy(self.cls(y), labels, reduction="none") * roi_w).sum()
            d = self.bbox(y).reshape(-1, CLASSES, 4)[is_fg.nonzero()[:, 0], labels[is_fg]]
            loss = loss + (F.smooth_l1_loss(d, box_t, reduction="none", beta=1.0).sum(1) * roi_w[is_fg]).sum()
            # Mask head on the foreground RoIs, the RoI's own class channel.
            m = roi_align(feat, mimg, mrois, mcounts, 14).transpose(1, 2).contiguous(memory_format=fmt)
            for c in self.mask_convs:
                m = F.relu(c(m))
            m = self.mask_pred(F.relu(self.deconv(m)))[torch.arange(len(mlabels)), mlabels]
            bce = F.binary_cross_entropy_with_logits(m, mask_t, reduction="none")
            loss = loss + (bce.flatten(1).sum(1) * mask_w).sum()
            return loss

    # ---- data: this process's images for every step, uint8 as ours holds them; boxes padded per image
    g = h5py.File(os.path.join(args.data_dir, "maskrcnn_mini.h5"), "r")["train"]
    scale, shift = 1.0 / (255.0 * float(g.attrs["std"])), float(g.attrs["mean"]) / float(g.attrs["std"])
    n_img = local * (args.warmup + args.steps)
    start = rank * n_img
    imgs = torch.from_numpy(g["images"][start:start + n_img]).permute(0, 3, 1, 2)
    first = g["inst_first"][start:start + n_img + 1]
    all_boxes = torch.from_numpy(g["boxes"][first[0]:first[-1]])
    all_cls = torch.from_numpy(g["classes"][first[0]:first[-1]].astype("int64"))
    mfirst = g["mask_first"][first[0]:first[-1] + 1]
    rle = g["mask_counts"][mfirst[0]:mfirst[-1]]
    G = max(1, int((first[1:] - first[:-1]).max()))
    gt_all = torch.tensor([0.0, 0.0, 1.0, 1.0]).repeat(n_img, G, 1)  # padding: a valid box, masked out
    valid_all = torch.zeros(n_img, G, dtype=torch.bool)
    labels_all = torch.zeros(n_img, G, dtype=torch.long)
    for i in range(n_img):
        a, b = first[i] - first[0], first[i + 1] - first[0]
        bx = all_boxes[a:b]
        gt_all[i, :b - a] = torch.cat([bx[:, :2], bx[:, :2] + bx[:, 2:]], 1)
        valid_all[i, :b - a] = True
        labels_all[i, :b - a] = all_cls[a:b]

    def batch(s):
        """Step s's inputs, prepared on the host as ours does inside its step: normalised and
        randomly flipped images, the boxes flipped with them, the instance masks decoded from RLE."""
        lo, hi = s * local, (s + 1) * local
        flip = torch.rand(local) < 0.5
        x = imgs[lo:hi].float()
        x = torch.where(flip[:, None, None, None], x.flip(3), x) * scale - shift
        gt = gt_all[lo:hi]
        mirrored = torch.stack([SIZE - gt[..., 2], gt[..., 1], SIZE - gt[..., 0], gt[..., 3]], -1)
        gt = torch.where(flip[:, None, None], mirrored, gt)
        a, b = first[lo] - first[0], first[hi] - first[0]
        masks = np.empty((b - a, SIZE, SIZE), np.uint8)
        for k in range(a, b):  # COCO RLE: alternating runs of 0 and 1, column-major
            c = rle[mfirst[k] - mfirst[0]:mfirst[k + 1] - mfirst[0]]
            masks[k - a] = np.repeat(np.arange(len(c), dtype=np.uint8) & 1, c).reshape(SIZE, SIZE).T
        masks = torch.from_numpy(masks).float()
        inst_flip = torch.repeat_interleave(flip, torch.from_numpy(first[lo + 1:hi + 1] - first[lo:hi]))
        masks = torch.where(inst_flip[:, None, None], masks.flip(2), masks)
        inst_of = torch.from_numpy(first[lo:hi] - first[lo])[:, None] + torch.arange(G)
        return x.contiguous(memory_format=fmt), gt, valid_all[lo:hi], labels_all[lo:hi], masks, inst_of

    anchors = anchors_for(SIZE // STRIDE, SIZE // STRIDE)
    visible = (anchors[:, :2] >= 0).all(1) & (anchors[:, 2:] <= SIZE).all(1)  # straddle 0
    model = MaskRcnnMini().to(memory_format=fmt)
    params = list(model.parameters())
    if world > 1:
        model = torch.nn.parallel.DistributedDataParallel(model)
    # Weight decay on the weights only (ours: ParamKind::weight), not on biases nor batch norm.
    opt = torch.optim.SGD([{"params": [p for p in params if p.dim() > 1]},
                           {"params": [p for p in params if p.dim() <= 1], "weight_decay": 0.0}],
                          lr=0.004, momentum=0.9, weight_decay=1e-4)
    times, host = [], []
    for s in range(args.warmup + args.steps):
        t0 = time.perf_counter()
        host_seconds[0] = 0.0
        x, gt, valid, labels, masks, inst_of = batch(s)
        loss = model(x, gt, valid, labels, masks, inst_of) / local  # DDP's mean over processes: / global batch
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
        host.append(host_seconds[0])
    times = torch_peer.slowest_step_times(torch, args, times)
    if rank == 0:
        print(json.dumps({"img_s": BATCH / statistics.median(times[args.warmup:]),
                          "step_ms": 1000 * statistics.median(times[args.warmup:]),
                          "box_logic_ms": 1000 * statistics.median(host[args.warmup:]), "loss": float(loss)}))


def main():
    args = torch_peer.parse_bench_arguments(__doc__)
    if args.child:
        return torch_child(args)
    if not os.path.exists(os.path.join(args.data_dir, "maskrcnn_mini.h5")):
        sys.exit(f"{args.data_dir}/maskrcnn_mini.h5 missing: run "
                 "`mlperf-dist prepare --benchmark maskrcnn --scale mini`")
    script = os.path.abspath(__file__)
    load = os.getloadavg()[0]
    ours1 = run_ours(args.binary, args.data_dir, 1, args.steps, args.warmup)
    ours2 = run_ours(args.binary, args.data_dir, 2, args.steps, args.warmup)
    run = lambda threads, world, layout: torch_peer.run_children(script, threads, world, layout, args.steps,
                                                                args.warmup, ("--data-dir", args.data_dir))
    rows, best, torch1, torch2, one = torch_peer.peer_configurations(run, "img_s")
    note = (f"torch 1 thread ({best}): {one['step_ms']:.0f} ms a step, of which {one['box_logic_ms']:.0f} ms "
            f"box logic without gradient (targets, proposals, NMS, sampling, mask targets)")
    torch_peer.print_comparison(f"mini maskrcnn training, global batch {BATCH}, median of {args.steps} steps after "
                                f"{args.warmup} (load average {load:.2f} at the start, {os.getloadavg()[0]:.2f} at "
                                f"the end)", "img/s", ours1, ours2, rows, torch1, torch2, notes=(note,),
                                json_path=args.json, extra_json={"torch_1thread": one})


if __name__ == "__main__":
    main()
