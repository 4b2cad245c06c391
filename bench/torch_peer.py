"""What bench/*_vs_pytorch.py share: the PyTorch peer runs as child processes of the benchmark script
itself (`--child`), each a fresh process whose thread counts are set before torch is imported, in
the configurations a 2-core machine allows: 1 process x 1 thread in both memory layouts (NCHW,
channels_last; the faster is used from then on), 1 process x 2 threads, and 2 processes x 1 thread
with DistributedDataParallel over gloo (a file store in /tmp). Ours at 1 rank is compared with
PyTorch at 1 thread, ours at 2 ranks with the best PyTorch configuration on 2 cores."""
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time


def parse_bench_arguments(doc, data_dir=True):
    """The options every peer benchmark takes (binary, data, steps, warm-up, JSON output) and the
    hidden ones of a child process."""
    import argparse
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("--binary", default="build/mlperf-dist")
    if data_dir:
        ap.add_argument("--data-dir", default="data")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--json")
    add_child_arguments(ap)
    return ap.parse_args()


def add_child_arguments(ap):
    """The hidden options a child process is started with."""
    ap.add_argument("--child", action="store_true", help=argparse_suppress())
    ap.add_argument("--threads", type=int, default=1, help=argparse_suppress())
    ap.add_argument("--rank", type=int, default=0, help=argparse_suppress())
    ap.add_argument("--world", type=int, default=1, help=argparse_suppress())
    ap.add_argument("--layout", default="nchw", help=argparse_suppress())
    ap.add_argument("--store", help=argparse_suppress())


def run_ours_train(binary, benchmark, data_dir, ranks, steps, warmup, extra=()):
    """Our `train` of a mini workload under mpirun at `ranks` ranks for warmup + steps steps; the
    median of the timed steps' global images/s, from its step lines."""
    out_dir = tempfile.mkdtemp(prefix=f"{benchmark}bench_")
    cmd = ["mpirun", "--oversubscribe", "--allow-run-as-root", "--mca", "btl", "self,vader", "--bind-to", "core",
           "-np", str(ranks), binary, "train", "--benchmark", benchmark, "--scale", "mini", "--data-dir", data_dir,
           *extra, "--max-steps", str(warmup + steps), "--progress-seconds", "0", "--results-dir", out_dir]
    p = subprocess.run(cmd, capture_output=True, text=True)
    rates = [float(m.group(1)) for m in re.finditer(r"step \d+/\d+ \|.*\| (\d+(?:\.\d+)?) img/s", p.stdout + p.stderr)]
    if len(rates) < warmup + steps:
        sys.exit(f"ours at {ranks} ranks: {len(rates)} step lines (exit {p.returncode})\n{p.stdout[-2000:]}{p.stderr[-2000:]}")
    return statistics.median(rates[warmup:warmup + steps])


def kernel_bench_rows(doc, binary, reps):
    """For the kernel peers: parses --binary and --reps, runs our bench with --tsv and returns the
    arguments and its rows (dicts keyed by the header line)."""
    import argparse
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("--binary", default=binary)
    ap.add_argument("--reps", type=int, default=reps)
    args = ap.parse_args()
    run = subprocess.run([args.binary, str(args.reps), "--tsv"], capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"{args.binary} failed ({run.returncode}): {run.stderr.strip()}")
    lines = run.stdout.strip().split("\n")
    header = lines[0].split("\t")
    return args, [dict(zip(header, line.split("\t"))) for line in lines[1:]]


def median_thread_seconds(run, reps):
    """run() once to warm up, then the median of reps calls' CPU time of the calling thread."""
    run()
    times = []
    for _ in range(reps):
        t0 = time.thread_time()
        run()
        times.append(time.thread_time() - t0)
    times.sort()
    return times[len(times) // 2]


def argparse_suppress():
    import argparse
    return argparse.SUPPRESS


def start_child(args):
    """In a child: torch with the configuration's thread count and seed, and its process group
    when there are several processes. Returns the torch module."""
    import torch
    torch.set_num_threads(args.threads)
    torch.manual_seed(1 + args.rank)
    if args.world > 1:
        import torch.distributed as dist
        dist.init_process_group("gloo", init_method=f"file://{args.store}", rank=args.rank, world_size=args.world)
    return torch


def resnet_basic_parts(nn, F):
    """conv + batch norm (eps 1e-5) and the ResNet basic block (3x3, 3x3, 1x1 projection where the
    stride or width changes) of our mini backbones (src/nn/conv_bn.h)."""
    def conv_bn(ci, co, k, s, p):
        return nn.Sequential(nn.Conv2d(ci, co, k, s, p, bias=False), nn.BatchNorm2d(co, eps=1e-5, momentum=0.1))

    class Block(nn.Module):
        def __init__(self, ci, co, s):
            super().__init__()
            self.a, self.b = conv_bn(ci, co, 3, s, 1), conv_bn(co, co, 3, 1, 1)
            self.proj = conv_bn(ci, co, 1, s, 0) if (s != 1 or ci != co) else None

        def forward(self, x):
            y = self.b(F.relu(self.a(x)))
            return F.relu(y + (self.proj(x) if self.proj is not None else x))

    return conv_bn, Block


def timed_steps(args, step):
    """step(s) for s in range(warmup + steps), each one's wall time."""
    times = []
    for s in range(args.warmup + args.steps):
        t0 = time.perf_counter()
        step(s)
        times.append(time.perf_counter() - t0)
    return times


def slowest_step_times(torch, args, times):
    """Each step's time on the slowest process (a step ends when every process has finished it)."""
    if args.world == 1:
        return times
    import torch.distributed as dist
    t = torch.tensor(times)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.tolist()


def run_children(script, threads, world, layout, steps, warmup, extra=()):
    """Runs `world` children of `script` and returns the JSON object rank 0 prints last."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads),
               OPENBLAS_NUM_THREADS=str(threads))
    store = tempfile.mktemp(prefix="torchpeer_store_")
    procs = [subprocess.Popen([sys.executable, script, "--child", "--threads", str(threads), "--rank", str(r),
                               "--world", str(world), "--layout", layout, "--store", store, "--steps", str(steps),
                               "--warmup", str(warmup), *extra],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for r in range(world)]
    outs = [p.communicate() for p in procs]
    for p, (o, e) in zip(procs, outs):
        if p.returncode != 0:
            sys.exit(f"torch child failed:\n{e[-3000:]}")
    if os.path.exists(store):
        os.remove(store)
    return json.loads(outs[0][0].strip().splitlines()[-1])


def peer_configurations(run, key):
    """run(threads, world, layout) -> a child's JSON object; `key` names its rate. Returns the rows
    (label -> rate), the layout used, the 1-core and best 2-core rates, and the 1-thread object of
    the layout used."""
    one_thread = {l: run(1, 1, l) for l in ("nchw", "channels_last")}
    best = max(one_thread, key=lambda l: one_thread[l][key])
    rows = {f"torch 1 proc x 1 thread ({l})": r[key] for l, r in one_thread.items()}
    two = [run(2, 1, best)[key], run(1, 2, best)[key]]
    rows[f"torch 1 proc x 2 threads ({best})"] = two[0]
    rows[f"torch 2 procs x 1 thread, DDP gloo ({best})"] = two[1]
    return rows, best, one_thread[best][key], max(two), one_thread[best]


def print_comparison(title, unit, ours1, ours2, torch_rows, torch1, torch2, notes=(), json_path=None, extra_json=None):
    """The table, the two ratios, and optionally the same as JSON."""
    rows = {"ours 1 rank": ours1, "ours 2 ranks": ours2, **torch_rows}
    print(title)
    for n in notes:
        print(n)
    print(f"{'configuration':52s} {unit:>8s}")
    for k, v in rows.items():
        print(f"{k:52s} {v:8.0f}")
    print(f"ratio ours/torch at 1 core:  {ours1 / torch1:.2f}x")
    print(f"ratio ours/torch at 2 cores: {ours2 / torch2:.2f}x (against the best PyTorch configuration)")
    if json_path:
        with open(json_path, "w") as f:
            json.dump({"rows": rows, "ratio_1core": ours1 / torch1, "ratio_2cores": ours2 / torch2,
                       **(extra_json or {})}, f, indent=2)
