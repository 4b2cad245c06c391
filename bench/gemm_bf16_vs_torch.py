"""The CPU bf16 GEMM beside PyTorch's, in one run: bench_gemm_bf16 (ours: OpenBLAS sgemm, and
gemm_bf16 widened or on our AVX512-BF16 kernel) and torch.matmul in fp32 and bf16 (oneDNN) on the
same shapes, one thread each, CPU time of the calling thread, median of the repetitions. Prints
GF/s and the ratio of our bf16 to PyTorch's bf16 and to PyTorch's fp32 (the best peer for the
same product).
  /usr/bin/python3 bench/gemm_bf16_vs_torch.py [--binary build/bench/bench_gemm_bf16] [--reps 15]
Debian's python3-torch is /usr/bin/python3's; the OpenBLAS and oneDNN kernels run as the
environment picks them (OPENBLAS_CORETYPE is left as it is)."""
import os

import torch_peer


def torch_gflops(shapes, reps):
    os.environ["OMP_NUM_THREADS"] = "1"
    import torch
    torch.set_num_threads(1)
    out = []
    for (_, ta, tb, m, n, k) in shapes:
        row = []
        for dtype in (torch.float32, torch.bfloat16):
            a = (torch.rand(k, m) if ta else torch.rand(m, k)).to(dtype) * 2 - 1
            b = (torch.rand(n, k) if tb else torch.rand(k, n)).to(dtype) * 2 - 1
            a = a.t() if ta else a  # a transposed view, as our trans flags read memory
            b = b.t() if tb else b
            c = a @ b
            seconds = torch_peer.median_thread_seconds(lambda: torch.matmul(a, b, out=c), reps)
            row.append(2.0 * m * n * k / seconds / 1e9)
        out.append(row)
    return out, torch.__version__, torch.backends.mkldnn.is_available()


def main():
    args, ours = torch_peer.kernel_bench_rows(__doc__, "build/bench/bench_gemm_bf16", 15)
    shapes = []
    for r in ours:
        name = r["shape"]
        ta = name.endswith(" dw")
        tb = name.endswith(" dx") or name.endswith("logits")
        shapes.append((name, ta, tb, int(r["m"]), int(r["n"]), int(r["k"])))
    peer, version, mkldnn = torch_gflops(shapes, args.reps)
    print(f"one thread each; PyTorch {version} (oneDNN {'on' if mkldnn else 'off'}); GF/s")
    print(f"{'shape':22s} {'ours fp32':>10s} {'ours bf16':>10s} {'torch fp32':>11s} {'torch bf16':>11s}"
          f" {'bf16/torch bf16':>16s} {'bf16/torch best':>16s}")
    worst = None
    for r, (t32, t16) in zip(ours, peer):
        ours16 = float(r["native_gfs"]) or float(r["widen_gfs"])
        best = max(t32, t16)
        ratio = ours16 / best
        worst = ratio if worst is None else min(worst, ratio)
        print(f"{r['shape']:22s} {float(r['sgemm_gfs']):10.1f} {ours16:10.1f} {t32:11.1f} {t16:11.1f}"
              f" {ours16 / t16:15.2f}x {ratio:15.2f}x")
    print(f"worst ratio of our bf16 GEMM to PyTorch's faster matmul: {worst:.2f}x")


if __name__ == "__main__":
    main()
