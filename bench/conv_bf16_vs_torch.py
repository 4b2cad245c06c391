"""The CPU bf16 convolutions beside PyTorch's, in one run: bench_conv_bf16 (ours: fp32, and bf16
through the op table) and PyTorch's convolution in fp32 and bf16 (oneDNN, channels_last, as our
NHWC) on the same shapes and passes, one thread each, CPU time of the calling thread, median of
the repetitions. Prints GF/s and the ratio of our bf16 to PyTorch's bf16 and to PyTorch's faster
of the two (the best peer for the same convolution).
  /usr/bin/python3 bench/conv_bf16_vs_torch.py [--binary build/bench/bench_conv_bf16] [--reps 9]
Debian's python3-torch is /usr/bin/python3's; its kernels run as the environment picks them."""
import os
import re
import sys

import torch_peer


def parse_shape(text):
    # "64,28x28x16->16,3/1/1" as bench_conv_bf16 prints it
    m = re.fullmatch(r"(\d+),(\d+)x(\d+)x(\d+)->(\d+),(\d+)/(\d+)/(\d+)", text)
    if not m:
        sys.exit(f"unexpected shape {text!r}")
    return tuple(int(g) for g in m.groups())


def torch_gflops(rows, reps):
    os.environ["OMP_NUM_THREADS"] = "1"
    import torch
    torch.set_num_threads(1)
    conv_backward = torch.ops.aten.convolution_backward
    out = []
    for r in rows:
        n, h, w, ci, co, k, s, p = parse_shape(r["shape"])
        flop = float(r["mflop"]) * 1e6
        row = []
        for dtype in (torch.float32, torch.bfloat16):
            x = (torch.rand(n, ci, h, w) * 2 - 1).to(dtype).contiguous(memory_format=torch.channels_last)
            wt = (torch.rand(co, ci, k, k) * 2 - 1).to(dtype).contiguous(memory_format=torch.channels_last)
            y = torch.nn.functional.conv2d(x, wt, stride=s, padding=p)
            dy = (torch.rand_like(y, dtype=torch.float32) * 2 - 1).to(dtype).contiguous(
                memory_format=torch.channels_last)
            if r["pass"] == "fwd":
                def run():
                    torch.nn.functional.conv2d(x, wt, stride=s, padding=p)
            else:
                mask = [r["pass"] == "bwdD", r["pass"] == "bwdW", False]

                def run():
                    conv_backward(dy, x, wt, None, [s, s], [p, p], [1, 1], False, [0, 0], 1, mask)
            row.append(flop / torch_peer.median_thread_seconds(run, reps) / 1e9)
        out.append(row)
    return out, torch.__version__, torch.backends.mkldnn.is_available()


def main():
    args, ours = torch_peer.kernel_bench_rows(__doc__, "build/bench/bench_conv_bf16", 9)
    peer, version, mkldnn = torch_gflops(ours, args.reps)
    print(f"one thread each; PyTorch {version} (oneDNN {'on' if mkldnn else 'off'}), channels_last; GF/s"
          f" (* = our bf16 direct kernel ran)")
    print(f"{'conv (n,h,w,cin->cout,k/s/p)':28s} {'pass':>4s} {'ours fp32':>9s} {'ours bf16':>10s}"
          f" {'torch fp32':>10s} {'torch bf16':>10s} {'bf16/torch bf16':>15s} {'bf16/torch best':>15s}")
    for r, (t32, t16) in zip(ours, peer):
        ours16 = float(r["bf16_gfs"])
        mark = "*" if r["bf16_direct"] == "1" else " "
        print(f"{r['shape']:28s} {r['pass']:>4s} {float(r['fp32_gfs']):9.1f} {ours16:9.1f}{mark}"
              f" {t32:10.1f} {t16:10.1f} {ours16 / t16:14.2f}x {ours16 / max(t32, t16):14.2f}x")


if __name__ == "__main__":
    main()
