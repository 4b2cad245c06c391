#!/usr/bin/python3
"""Training tokens/s of our two translation models (transformer, gnmt; mini scale) beside PyTorch's,
same models, same global batches, same cores, in one run.

  python3 bench/translation_vs_torch.py --binary build/mlperf-dist --data-dir data \
      [--models transformer,gnmt] [--steps 20] [--warmup 3] [--set KEY=VALUE ...] [--precision bf16]

Needs Debian's python3-torch and python3-h5py (apt-get install python3-torch python3-h5py; not
installed by launch/install-deps: the test suite does not use them) and the prepared mini data.

Ours: `mpirun -np N <binary> train --benchmark M --scale mini --max-steps warmup+steps
--progress-seconds 0` for N = 1 and 2 (one OpenBLAS thread per rank, as the train command sets);
its per-step lines (rank 0's step time and the step's global tokens/s) give the tokens/s of the
timed steps alone. (The summary's `throughput:` line would count the warm-up steps too, and comes
only after the beam-search evaluation that a --max-steps stop runs, about a minute on a random
model: the script ends the job, SIGTERM to its mpirun, once it has the step lines it needs.)
PyTorch (the interpreter's own torch, Debian's python3-torch): the same architectures, written
from src/workloads/{transformer,gnmt}/*_model.h, the same hyperparameters (read from the binary's
`train --print-config` with the same --set pairs), the same global batches in the same order
(plan_epoch of src/workloads/translation/translation_workload.cpp and its counter-based RNG,
re-implemented here), the same loss (label-smoothed cross-entropy summed over the target tokens,
divided by the global batch), Adam with the same betas and epsilon, gradient clipping when
grad_clip_norm > 0. Configurations: 1 process x 1 thread; 1 x 2 threads, with OpenMP's default
and with its passive wait policy; 2 processes x 1 thread with DistributedDataParallel over gloo
(a file store on /tmp, loopback only). Ours at 1 rank is compared with PyTorch at 1 thread, ours
at 2 ranks with the best PyTorch configuration on 2 cores.
Each configuration runs in a fresh process whose OpenMP, OpenBLAS and MKL thread counts are set
before torch is imported. Work per step: source tokens + target tokens (eos included), as ours.

Differences that remain, by design of each side: the learning rate (ours follows the schedule,
PyTorch a constant base LR: the cost of a step does not depend on it), the initial weights
(same distributions, different generators), dropout masks, and ours skipping padded attention
keys where PyTorch computes the full padded matrices (the ordinary PyTorch formulation).
Both compute the output projection / classifier on the non-pad target rows only.
"""
import argparse
import json
import math
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time

MODELS = ("transformer", "gnmt")
PAD, BOS, EOS = 0, 1, 2
BATCHES_PER_POOL = 16
U64 = (1 << 64) - 1
SHUFFLE_STREAM = 0x5348_5546_0000_0000  # datasets/sampling.h "SHUF"
BATCH_ORDER_STREAM = 0x424F_5244_0000_0000  # translation_workload.cpp "BORD"


# ---------------------------------------------------------------- our counter-based RNG (core/rng.h)
def mix64(z):
    z = (z + 0x9E3779B97F4A7C15) & U64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & U64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & U64
    return z ^ (z >> 31)


def fisher_yates(seed, stream, items):
    """datasets/sampling.cpp's shuffle: j = rng_below(seed, stream, i, i + 1) for i = n-1 .. 1."""
    base = mix64(seed ^ mix64(stream & U64))
    for i in range(len(items) - 1, 0, -1):
        j = (mix64(base ^ i) * (i + 1)) >> 64
        items[i], items[j] = items[j], items[i]
    return items


# ---------------------------------------------------------------- data and batches (as ours)
def load_pairs(data_dir, model, cfg):
    """The training pairs kept by the max_sequence_length rule: (index, src_len, tgt_len), and the
    token arrays. Mirrors make_translation_workload."""
    import h5py
    import numpy as np
    path = os.path.join(data_dir, f"{model}_mini.h5")
    if not os.path.exists(path):
        sys.exit(f"translation_vs_torch: {path} is missing: run `mlperf-dist prepare --benchmark {model} "
                 f"--scale mini --data-dir {data_dir}`")
    with h5py.File(path, "r") as f:
        vocab = int(f.attrs["vocab_size"])
        tr = f["train"]
        src_tok = np.asarray(tr["src_tokens"][...], dtype=np.int64)
        src_off = np.asarray(tr["src_offsets"][...], dtype=np.int64)
        tgt_tok = np.asarray(tr["tgt_tokens"][...], dtype=np.int64)
        tgt_off = np.asarray(tr["tgt_offsets"][...], dtype=np.int64)
    L = int(cfg["max_sequence_length"])
    truncate = cfg["max_sequence_length_method"] == "truncate"
    s_len = np.diff(src_off)
    t_len = np.diff(tgt_off)
    pairs = []
    for i in range(len(s_len)):
        s, t = int(s_len[i]), int(t_len[i])
        if s < 1 or t < 1:
            continue
        if not truncate and (s > L or t > L):
            continue
        pairs.append((i, min(s, L), min(t, L)))
    return vocab, pairs, (src_tok, src_off, tgt_tok, tgt_off)


def plan_epoch(seed, epoch, pairs, global_batch):
    """Epoch `epoch` (0-based) as positions into `pairs`, global batch after global batch."""
    n = len(pairs)
    nb = n // global_batch
    perm = fisher_yates(seed, SHUFFLE_STREAM + (epoch & 0xFFFFFFFF), list(range(n)))
    order = perm[: nb * global_batch]
    pool = BATCHES_PER_POOL * global_batch
    for p in range(0, nb * global_batch, pool):
        seg = order[p : min(p + pool, nb * global_batch)]
        seg.sort(key=lambda a: max(pairs[a][1], pairs[a][2]))  # stable, as std::stable_sort
        order[p : p + len(seg)] = seg
    batch_perm = fisher_yates(seed, BATCH_ORDER_STREAM + (epoch & 0xFFFFFFFF), list(range(nb)))
    return [order[b * global_batch : (b + 1) * global_batch] for b in batch_perm]


def step_batches(seed, pairs, global_batch, steps):
    """The global batches of steps 0..steps-1 (epochs planned as needed)."""
    out, epoch = [], 0
    while len(out) < steps:
        out.extend(plan_epoch(seed, epoch, pairs, global_batch))
        epoch += 1
    return out[:steps]


# ---------------------------------------------------------------- config (from our binary)
def resolved_config(binary, model, sets):
    cmd = [binary, "train", "--benchmark", model, "--scale", "mini", "--print-config"]
    for s in sets:
        cmd += ["--set", s]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"translation_vs_torch: {' '.join(cmd)} failed ({p.returncode}):\n{p.stderr}{p.stdout}")
    cfg = {}
    for line in p.stdout.splitlines():
        if ":" not in line:
            continue
        k, v = line.split(":", 1)
        v = v.strip()
        try:
            cfg[k.strip()] = json.loads(v)
        except ValueError:
            cfg[k.strip()] = v
    return cfg


# ---------------------------------------------------------------- machine line
def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def openblas_core(lib_path):
    """The kernel OpenBLAS picks (honours OPENBLAS_CORETYPE), asked of the library itself."""
    import ctypes
    try:
        lib = ctypes.CDLL(lib_path)
        f = lib.openblas_get_corename
        f.restype = ctypes.c_char_p
        return f().decode()
    except (OSError, AttributeError):
        return None


def our_blas(binary):
    try:
        out = subprocess.run(["ldd", binary], capture_output=True, text=True).stdout
    except OSError:
        return "unknown", None
    for line in out.splitlines():
        m = re.search(r"(\S*(?:openblas|blas)\S*)\s+=>\s+(\S+)", line)
        if m:
            real = os.path.realpath(m.group(2))
            return real, openblas_core(real)
    return "unknown", None


# ---------------------------------------------------------------- our side
PARAMS_RE = re.compile(r"model: .*?(\d+) parameters")
STEP_RE = re.compile(r"epoch (\d+) step (\d+)/(\d+) \| loss ([-+0-9.eEnaif]+) \| lr \S+ \| (\d+) ms \| (\d+) tokens/s")


def run_ours(args, model, ranks, total_steps):
    """Our train command at `ranks` ranks; stopped (SIGTERM to its mpirun) once the step lines of all
    warm-up and timed steps are in, so the beam-search evaluation that follows a --max-steps stop
    (about a minute on a random-init model) is not waited for."""
    import signal
    import threading
    res_dir = tempfile.mkdtemp(prefix="tvt_results_")
    cmd = ["mpirun", "--oversubscribe", "--allow-run-as-root", "--mca", "btl", "self,vader", "-np", str(ranks),
           args.binary, "train", "--benchmark", model, "--scale", "mini", "--data-dir", args.data_dir,
           "--results-dir", res_dir, "--max-steps", str(total_steps), "--progress-seconds", "0",
           "--precision", args.precision]
    for s in args.set:
        cmd += ["--set", s]
    t0 = time.time()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    timer = threading.Timer(args.ours_timeout, p.kill)
    timer.start()
    lines, steps, stopped, n_params = [], [], False, None
    try:
        for line in p.stdout:
            lines.append(line.rstrip("\n"))
            mp = PARAMS_RE.search(line)
            if mp and n_params is None:
                n_params = int(mp.group(1))
            m = STEP_RE.search(line)
            if m:
                steps.append((int(m.group(2)), float(m.group(4)), int(m.group(5)), int(m.group(6))))
                if len(steps) >= total_steps and not stopped:
                    stopped = True
                    p.send_signal(signal.SIGTERM)  # mpirun ends the job and cleans up in ~2 s
        try:
            p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    finally:
        timer.cancel()
        if p.poll() is None:
            p.kill()
            p.wait()
        shutil.rmtree(res_dir, ignore_errors=True)
    wall = time.time() - t0
    if len(steps) < total_steps:
        why = f"exit {p.returncode}" if p.returncode not in (0, 3) else "too few step lines"
        return {"error": f"{why}: {len(steps)} of {total_steps} step lines", "cmd": " ".join(cmd),
                "tail": "\n".join(lines[-25:])}
    timed = steps[args.warmup : total_steps]
    secs = sum(ms for _, _, ms, _ in timed) / 1000.0
    work = sum(rate * ms / 1000.0 for _, _, ms, rate in timed)  # the step's global source + target tokens
    return {
        "tokens_per_s": work / secs if secs > 0 else 0.0,
        "first_loss": steps[0][1],
        "params": n_params,
        "step_ms": [ms for _, _, ms, _ in steps[:total_steps]],
        "step_tokens": [round(rate * ms / 1000.0) for _, _, ms, rate in steps[:total_steps]],
        "wall_s": wall,
        "cmd": " ".join(cmd),
    }


# ---------------------------------------------------------------- PyTorch side (worker processes)
def build_torch_model(model, cfg, vocab, max_len):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    if model == "transformer":
        d, H, Fd = int(cfg["d_model"]), int(cfg["heads"]), int(cfg["ffn_dim"])
        p_drop = float(cfg["dropout"])

        def xavier_linear(i, o):
            lin = nn.Linear(i, o)
            bound = math.sqrt(6.0 / (i + o))
            nn.init.uniform_(lin.weight, -bound, bound)
            nn.init.zeros_(lin.bias)
            return lin

        def attention(q, k, v, mask):
            # q [B, Tq, d], k/v [B, Tk, d]; mask additive, broadcast to [B, H, Tq, Tk].
            B, Tq, _ = q.shape
            Tk = k.shape[1]
            hd = d // H
            q = q.view(B, Tq, H, hd).transpose(1, 2) * (1.0 / math.sqrt(hd))
            k = k.view(B, Tk, H, hd).transpose(1, 2)
            v = v.view(B, Tk, H, hd).transpose(1, 2)
            p = torch.softmax(torch.matmul(q, k.transpose(-1, -2)) + mask, dim=-1)
            return torch.matmul(p, v).transpose(1, 2).reshape(B, Tq, d)

        class EncLayer(nn.Module):
            def __init__(self):
                super().__init__()
                self.qkv, self.out = xavier_linear(d, 3 * d), xavier_linear(d, d)
                self.ln1 = nn.LayerNorm(d, eps=1e-5)
                self.ffn1, self.ffn2 = xavier_linear(d, Fd), xavier_linear(Fd, d)
                self.ln2 = nn.LayerNorm(d, eps=1e-5)
                self.drop = nn.Dropout(p_drop)

            def forward(self, x, mask):
                q, k, v = self.qkv(x).split(d, dim=-1)
                x = self.ln1(x + self.drop(self.out(attention(q, k, v, mask))))
                return self.ln2(x + self.drop(self.ffn2(F.relu(self.ffn1(x)))))

        class DecLayer(nn.Module):
            def __init__(self):
                super().__init__()
                self.qkv, self.out = xavier_linear(d, 3 * d), xavier_linear(d, d)
                self.ln1 = nn.LayerNorm(d, eps=1e-5)
                self.q, self.kv, self.cross_out = xavier_linear(d, d), xavier_linear(d, 2 * d), xavier_linear(d, d)
                self.ln2 = nn.LayerNorm(d, eps=1e-5)
                self.ffn1, self.ffn2 = xavier_linear(d, Fd), xavier_linear(Fd, d)
                self.ln3 = nn.LayerNorm(d, eps=1e-5)
                self.drop = nn.Dropout(p_drop)

            def forward(self, y, enc, self_mask, src_mask):
                q, k, v = self.qkv(y).split(d, dim=-1)
                y = self.ln1(y + self.drop(self.out(attention(q, k, v, self_mask))))
                k, v = self.kv(enc).split(d, dim=-1)
                y = self.ln2(y + self.drop(self.cross_out(attention(self.q(y), k, v, src_mask))))
                return self.ln3(y + self.drop(self.ffn2(F.relu(self.ffn1(y)))))

        class Transformer(nn.Module):
            def __init__(self):
                super().__init__()
                # One table: source, target and output projection; N(0, d^-1/2), padding row zero.
                self.embedding = nn.Parameter(torch.randn(vocab, d) / math.sqrt(d))
                with torch.no_grad():
                    self.embedding[PAD].zero_()
                self.enc = nn.ModuleList(EncLayer() for _ in range(int(cfg["encoder_layers"])))
                self.dec = nn.ModuleList(DecLayer() for _ in range(int(cfg["decoder_layers"])))
                self.drop = nn.Dropout(p_drop)
                # fairseq's sinusoids: sin in the first half, cos in the second, positions from 0.
                half = d // 2
                step = math.log(10000.0) / (half - 1) if half > 1 else 0.0
                freqs = torch.exp(torch.arange(half, dtype=torch.float64) * -step)
                ang = torch.arange(max_len, dtype=torch.float64)[:, None] * freqs[None, :]
                pe = torch.zeros(max_len, d, dtype=torch.float64)
                pe[:, :half], pe[:, half : 2 * half] = torch.sin(ang), torch.cos(ang)
                self.register_buffer("pe", pe.float(), persistent=False)
                self.scale = math.sqrt(d)

            def embed(self, tokens):
                return self.drop(F.embedding(tokens, self.embedding) * self.scale + self.pe[: tokens.shape[1]])

            def forward(self, b):
                src, tgt_in = b["src"], b["tgt_in"]
                B, S = src.shape
                T = tgt_in.shape[1]
                src_mask = torch.zeros(B, 1, 1, S).masked_fill_(b["src_pad"].view(B, 1, 1, S), float("-inf"))
                causal = torch.full((T, T), float("-inf")).triu_(1).view(1, 1, T, T)
                x = self.embed(src)
                for L in self.enc:
                    x = L(x, src_mask)
                y = self.embed(tgt_in)
                for L in self.dec:
                    y = L(y, x, causal, src_mask)
                return y[b["valid"]] @ self.embedding.t()  # logits of the non-pad target rows

        return Transformer()

    # gnmt
    Hd = int(cfg["hidden_size"])
    n_enc, n_dec = int(cfg["encoder_layers"]), int(cfg["decoder_layers"])
    p_drop = float(cfg["dropout"])
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

    class Gnmt(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Parameter(torch.empty(vocab, Hd))
            self.enc = nn.ModuleList([nn.LSTM(Hd, Hd, bidirectional=True)] +
                                     [nn.LSTM(2 * Hd if i == 1 else Hd, Hd) for i in range(1, n_enc)])
            self.dec = nn.ModuleList([nn.LSTM(Hd, Hd)] + [nn.LSTM(2 * Hd, Hd) for _ in range(1, n_dec)])
            self.w_q = nn.Linear(Hd, Hd, bias=False)
            self.w_k = nn.Linear(Hd, Hd, bias=False)
            self.att_bias = nn.Parameter(torch.zeros(Hd))
            self.att_v = nn.Parameter(torch.empty(Hd))
            self.att_g = nn.Parameter(torch.tensor(1.0 / math.sqrt(Hd)))
            self.classifier = nn.Linear(Hd, vocab)
            self.drop = nn.Dropout(p_drop)
            # The reference's init: uniform(-0.1, 0.1) everywhere, b_hh zero, padding row zero.
            with torch.no_grad():
                for name, prm in self.named_parameters():
                    if name in ("att_bias", "att_g"):
                        continue
                    if "bias_hh" in name:
                        prm.zero_()
                    else:
                        prm.uniform_(-0.1, 0.1)
                self.embedding[PAD].zero_()

        def forward(self, b):
            src, tgt_in = b["src_tm"], b["tgt_in_tm"]  # [S, B], [T, B]
            x = self.drop(F.embedding(src, self.embedding))
            packed = pack_padded_sequence(x, b["src_len"], enforce_sorted=False)
            y, _ = self.enc[0](packed)
            y, _ = pad_packed_sequence(y, total_length=src.shape[0])  # [S, B, 2H]
            for i in range(1, n_enc):
                h, _ = self.enc[i](self.drop(y))
                y = h + y if i >= 2 else h
            values = y.transpose(0, 1)  # [B, S, H]
            keys = self.w_k(values)
            q, _ = self.dec[0](self.drop(F.embedding(tgt_in, self.embedding)))  # [T, B, H]
            qp = self.w_q(q.transpose(0, 1))  # [B, T, H]
            v = self.att_v * (self.att_g / self.att_v.norm())
            scores = torch.tanh(qp.unsqueeze(2) + keys.unsqueeze(1) + self.att_bias) @ v  # [B, T, S]
            scores = scores.masked_fill(b["src_pad"].unsqueeze(1), float("-inf"))
            ctx = torch.bmm(torch.softmax(scores, dim=-1), values).transpose(0, 1)  # [T, B, H]
            y = q
            for i in range(1, n_dec):
                h, _ = self.dec[i](self.drop(torch.cat((y, ctx), dim=2)))
                y = h + y if i >= 2 else h
            return self.classifier(y.transpose(0, 1)[b["valid"]])

    return Gnmt()


def make_batch(model, ids, pairs, arrays):
    """One rank's batch as fill_training_batch forms it (tensors; built inside the timed step)."""
    import numpy as np
    import torch
    src_tok, src_off, tgt_tok, tgt_off = arrays
    n = len(ids)
    S = max(1, max(pairs[i][1] for i in ids))
    T = max(1, max(pairs[i][2] + 1 for i in ids))
    src = np.zeros((n, S), dtype=np.int64)
    tgt_in = np.zeros((n, T), dtype=np.int64)
    tgt_out = np.zeros((n, T), dtype=np.int64)
    src_len = np.empty(n, dtype=np.int64)
    tgt_len = np.empty(n, dtype=np.int64)
    for r, i in enumerate(ids):
        k, s, t = pairs[i]
        src[r, :s] = src_tok[src_off[k] : src_off[k] + s]
        tg = tgt_tok[tgt_off[k] : tgt_off[k] + t]
        tgt_in[r, 0] = BOS
        tgt_in[r, 1 : t + 1] = tg
        tgt_out[r, :t] = tg
        tgt_out[r, t] = EOS
        src_len[r], tgt_len[r] = s, t + 1
    src_t, tgt_in_t, tgt_out_t = torch.from_numpy(src), torch.from_numpy(tgt_in), torch.from_numpy(tgt_out)
    src_len_t, tgt_len_t = torch.from_numpy(src_len), torch.from_numpy(tgt_len)
    valid = torch.arange(T)[None, :] < tgt_len_t[:, None]  # [B, T]
    b = {"src_pad": torch.arange(S)[None, :] >= src_len_t[:, None], "valid": valid,
         "labels": tgt_out_t[valid], "work": int(src_len.sum() + tgt_len.sum())}
    if model == "transformer":
        b.update(src=src_t, tgt_in=tgt_in_t)
    else:
        b.update(src_tm=src_t.t().contiguous(), tgt_in_tm=tgt_in_t.t().contiguous(), src_len=src_len_t)
    return b


def worker(args):
    """One PyTorch configuration (or one rank of it); rank 0 prints `RESULT {json}`."""
    import torch
    import torch.nn.functional as F
    rank, world = args.rank, args.world
    torch.set_num_threads(args.threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    torch.set_flush_denormal(True)  # ours runs with FTZ/DAZ on every computing thread
    cfg = json.loads(args.cfg_json)
    model_name = args.worker
    vocab, pairs, arrays = load_pairs(args.data_dir, model_name, cfg)
    G = int(cfg["global_batch_size"])
    if G % world:
        sys.exit(f"global batch {G} not divisible by {world} processes")
    per = G // world
    total = args.warmup + args.steps
    batches = step_batches(int(cfg["seed"]), pairs, G, total)
    max_len = max(max(p[1], p[2] + 1) for p in pairs)
    torch.manual_seed(1000 + int(cfg["seed"]))
    model = build_torch_model(model_name, cfg, vocab, max_len)
    net = model
    if world > 1:
        import torch.distributed as dist
        dist.init_process_group("gloo", init_method="file://" + args.store, rank=rank, world_size=world)
        net = torch.nn.parallel.DistributedDataParallel(model)  # broadcasts rank 0's weights
    params = [p for p in model.parameters()]
    opt = torch.optim.Adam(params, lr=float(cfg["opt_base_learning_rate"]),
                           betas=(float(cfg["opt_adam_beta_1"]), float(cfg["opt_adam_beta_2"])),
                           eps=float(cfg["opt_adam_epsilon"]))
    clip = float(cfg.get("grad_clip_norm", 0) or 0)
    ls = float(cfg["label_smoothing"])
    n_params = sum(p.numel() for p in params)

    step_s, works, losses = [], [], []
    for step in range(total):
        t0 = time.perf_counter()
        b = make_batch(model_name, batches[step][rank * per : (rank + 1) * per], pairs, arrays)
        # bf16: PyTorch's own mixed precision (autocast: matmuls in bf16, fp32 weights and optimizer).
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.precision == "bf16"):
            logits = net(b)
            loss_sum = F.cross_entropy(logits.float(), b["labels"], label_smoothing=ls, reduction="sum")
        # Ours: gradient of loss_sum / G per rank, summed over ranks; DDP averages, hence * world.
        (loss_sum * (world / G)).backward()
        if clip > 0:
            torch.nn.utils.clip_grad_norm_(params, clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
        dt = time.perf_counter() - t0
        stats = torch.tensor([loss_sum.item(), float(b["labels"].numel()), float(b["work"])], dtype=torch.float64)
        if world > 1:
            import torch.distributed as dist
            dist.all_reduce(stats)  # after the timed region: the global loss and work of the step
        step_s.append(dt)
        losses.append(stats[0].item() / stats[1].item())
        works.append(stats[2].item())
        if step == 0 and not math.isfinite(losses[0]):
            if rank == 0:
                print("RESULT " + json.dumps({"error": "PyTorch's initial loss is NaN/inf", "first_loss": losses[0]}),
                      flush=True)
            sys.exit(4)
    secs = sum(step_s[args.warmup :])
    out = {"tokens_per_s": sum(works[args.warmup :]) / secs if secs > 0 else 0.0, "first_loss": losses[0],
           "step_tokens": [int(w) for w in works],
           "step_ms": [round(1000 * s, 1) for s in step_s], "params": n_params, "threads": torch.get_num_threads()}
    if world > 1:
        import torch.distributed as dist
        dist.barrier()
        dist.destroy_process_group()
    if rank == 0:
        print("RESULT " + json.dumps(out), flush=True)


def torch_env(threads, extra):
    env = dict(os.environ)
    env.update(extra)
    for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[k] = str(threads)
    env.setdefault("GLOO_SOCKET_IFNAME", "lo")
    return env


def run_torch(args, model, cfg, threads, world, extra_env, timeout):
    base = [sys.executable, os.path.abspath(__file__), "--worker", model, "--data-dir", args.data_dir,
            "--steps", str(args.steps), "--warmup", str(args.warmup), "--threads", str(threads),
            "--world", str(world), "--cfg-json", json.dumps(cfg), "--precision", args.precision]
    tmp = tempfile.mkdtemp(prefix="tvt_store_")
    store = os.path.join(tmp, "store")
    procs = []
    t0 = time.time()
    try:
        for r in range(world):
            procs.append(subprocess.Popen(base + ["--rank", str(r), "--store", store], env=torch_env(threads, extra_env),
                                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
        outs = []
        for p in procs:
            left = max(1.0, timeout - (time.time() - t0))
            try:
                outs.append(p.communicate(timeout=left)[0])
            except subprocess.TimeoutExpired:
                for q in procs:
                    if q.poll() is None:
                        q.kill()
                return {"error": f"timed out after {timeout:.0f} s"}
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    for line in outs[0].splitlines():
        if line.startswith("RESULT "):
            res = json.loads(line[len("RESULT "):])
            res["wall_s"] = time.time() - t0
            return res
    bad = [(r, p.returncode) for r, p in enumerate(procs) if p.returncode]
    tail = "\n".join("\n".join(o.splitlines()[-12:]) for o in outs)
    return {"error": f"no result (exit codes {bad})", "tail": tail}


# ---------------------------------------------------------------- the comparison
def fmt_rate(r):
    return f"{r['tokens_per_s']:,.0f}" if "tokens_per_s" in r else "failed"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", default="build/mlperf-dist")
    ap.add_argument("--data-dir", default="data")
    ap.add_argument("--models", default="transformer,gnmt")
    ap.add_argument("--steps", type=int, default=20, help="timed steps")
    ap.add_argument("--warmup", type=int, default=3, help="steps run before timing")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="passed to our train command; PyTorch takes the resolved config, so it follows too")
    ap.add_argument("--no-ddp", action="store_true", help="skip the 2 x 1 thread DDP configuration")
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                    help="bf16: ours with --precision bf16, PyTorch under torch.autocast(cpu, bfloat16)")
    ap.add_argument("--torch-timeout", type=float, default=1800, help="seconds per PyTorch configuration")
    ap.add_argument("--ours-timeout", type=float, default=1800, help="seconds per run of ours")
    ap.add_argument("--loss-tolerance", type=float, default=1.0,
                    help="nats from ln(vocab) beyond which an initial loss is flagged (transformer)")
    # Worker mode (internal).
    ap.add_argument("--worker", choices=MODELS, help=argparse.SUPPRESS)
    ap.add_argument("--threads", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--world", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--rank", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--store", default="", help=argparse.SUPPRESS)
    ap.add_argument("--cfg-json", default="{}", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args)

    models = [m for m in args.models.split(",") if m]
    for m in models:
        if m not in MODELS:
            sys.exit(f"translation_vs_torch: unknown model {m} (use {','.join(MODELS)})")
    if args.steps < 1 or args.warmup < 0:
        sys.exit("translation_vs_torch: --steps >= 1 and --warmup >= 0")
    args.binary = os.path.abspath(args.binary)
    args.data_dir = os.path.abspath(args.data_dir)
    if not os.access(args.binary, os.X_OK):
        sys.exit(f"translation_vs_torch: {args.binary} is not an executable")

    # Machine line (the BLAS that torch loaded: from this process's maps after one matmul).
    import torch
    torch.matmul(torch.ones(64, 64), torch.ones(64, 64))
    torch_blas = "unknown"
    with open("/proc/self/maps") as f:
        libs = {line.split()[-1] for line in f if re.search(r"(openblas|libblas|mkl|blis)", line)}
    if libs:
        torch_blas = sorted(libs)[0]
    blas_info = re.search(r"BLAS_INFO=([^,]+)", torch.__config__.show())
    torch_core = openblas_core(torch_blas) if torch_blas != "unknown" else None
    ours_lib, ours_core = our_blas(args.binary)
    coretype = os.environ.get("OPENBLAS_CORETYPE", "unset")
    machine = {"cpu": cpu_model(), "cores": os.cpu_count(), "OPENBLAS_CORETYPE": coretype,
               "torch": torch.__version__, "torch_blas_info": blas_info.group(1) if blas_info else "?",
               "torch_blas_lib": torch_blas, "torch_openblas_core": torch_core, "ours_blas_lib": ours_lib,
               "ours_openblas_core": ours_core, "python": platform.python_version(),
               "load_before": open("/proc/loadavg").read().split()[:3]}
    print(f"machine: {machine['cpu']}, {machine['cores']} cores, OPENBLAS_CORETYPE={coretype}; torch "
          f"{machine['torch']} (BLAS_INFO={machine['torch_blas_info']}, {torch_blas}, OpenBLAS core {torch_core}); "
          f"ours {ours_lib} (OpenBLAS core {ours_core}); load {' '.join(machine['load_before'])}", flush=True)
    print(f"timing: {args.steps} steps after {args.warmup} warm-up steps; tokens = source + target (eos incl.); "
          f"precision {args.precision}", flush=True)

    report = {"machine": machine, "steps": args.steps, "warmup": args.warmup, "sets": args.set,
              "precision": args.precision, "models": {}}
    failed = False
    for model in models:
        cfg = resolved_config(args.binary, model, args.set)
        vocab, pairs, _ = load_pairs(args.data_dir, model, cfg)
        G = int(cfg["global_batch_size"])
        total = args.warmup + args.steps
        print(f"\n== {model}: vocab {vocab}, {len(pairs)} training pairs, global batch {G}, "
              f"{total} steps ==", flush=True)
        ours = {}
        for n in (1, 2):
            print(f"  ours {n} rank(s)...", end="", flush=True)
            ours[n] = run_ours(args, model, n, total)
            print(f" {fmt_rate(ours[n])} tokens/s" + (f" ({ours[n]['error']})" if "error" in ours[n] else ""),
                  flush=True)
            if "error" in ours[n]:
                print(f"    {ours[n]['cmd']}\n" + "\n".join("    " + l for l in ours[n]["tail"].splitlines()),
                      flush=True)
        # (name, threads per process, processes, extra environment). OpenMP's default spin-waiting
        # fights OpenBLAS's own threads for 2 cores (on a loaded machine 3x slower): hence the
        # passive variant; the best of all is the peer.
        configs = [("torch 1 thread", 1, 1, {}), ("torch 2 threads", 2, 1, {}),
                   ("torch 2 threads, OMP passive", 2, 1, {"OMP_WAIT_POLICY": "PASSIVE"})]
        if not args.no_ddp:
            configs.append(("torch 2x1 DDP (gloo)", 1, 2, {}))
        tr = {}
        for name, threads, world, extra in configs:
            print(f"  {name}...", end="", flush=True)
            tr[name] = run_torch(args, model, cfg, threads, world, extra, args.torch_timeout)
            print(f" {fmt_rate(tr[name])} tokens/s" + (f" ({tr[name]['error']})" if "error" in tr[name] else ""),
                  flush=True)
            if "error" in tr[name] and "tail" in tr[name]:
                print("\n".join("    " + l for l in tr[name]["tail"].splitlines()), flush=True)

        # Correctness before believing the timing: the first step's loss on the same first batch.
        ln_v = math.log(vocab)
        tl = tr["torch 1 thread"].get("first_loss")
        ol = ours[1].get("first_loss")
        print(f"  initial loss (first batch, per target token): ours {ol}, PyTorch {tl}, ln(vocab) = {ln_v:.4f}")
        if tl is None or not math.isfinite(tl):
            print(f"  FAIL: PyTorch's initial loss is {tl}", flush=True)
            failed = True
        if ol is None or not math.isfinite(ol):
            print(f"  FAIL: our initial loss is {ol}", flush=True)
            failed = True
        op, tp = ours[1].get("params"), tr["torch 1 thread"].get("params")
        extra = ""
        if model == "gnmt":  # b_hh: 4H per LSTM direction; ours pads each view to 16 floats
            n_dirs = int(cfg["encoder_layers"]) + 1 + int(cfg["decoder_layers"])
            extra = f" (PyTorch's second LSTM bias b_hh: {4 * int(cfg['hidden_size']) * n_dirs:,}; ours counts view padding)"
        print(f"  parameters: ours {op:,}, PyTorch {tp:,}{extra}" if op and tp else f"  parameters: ours {op}, PyTorch {tp}")
        # Same batches: the per-step tokens agree (ours are rate x rounded ms, so within ~1%).
        ot, tt = ours[1].get("step_tokens"), tr["torch 1 thread"].get("step_tokens")
        if ot and tt:
            same = all(abs(a - b) <= 0.01 * b + 2 for a, b in zip(ot, tt))
            print(f"  same global batches: {'yes' if same else 'NO'} (tokens per step, ours ~ {ot[:5]}..., "
                  f"PyTorch {tt[:5]}...)")
            if not same:
                print("  WARNING: the batch order differs from ours: the tokens/s figures still compare, "
                      "step by step they do not")
        if model == "transformer":
            for who, v in (("ours", ol), ("PyTorch", tl)):
                if v is not None and math.isfinite(v) and abs(v - ln_v) > args.loss_tolerance:
                    print(f"  WARNING: {who}'s initial loss {v:.4f} is {abs(v - ln_v):.2f} nats from ln(vocab)")

        # Peers at the same core count: 1 core = torch 1 thread; 2 cores = best of the others.
        def best(names):
            ok = [(tr[n]["tokens_per_s"], n) for n in names if n in tr and "tokens_per_s" in tr[n]]
            return max(ok) if ok else (None, None)

        peer = {1: best(["torch 1 thread"]), 2: best([n for n, t, w, _ in configs if t * w == 2])}
        rows = []
        for n in (1, 2):
            r = ours[n].get("tokens_per_s")
            p, pn = peer[n]
            rows.append((f"ours {n} rank{'s' if n > 1 else ''} x 1 thread", r,
                         f"{r / p:.2f} vs {pn}" if r and p else "-"))
        for name, threads, world, _ in configs:
            rows.append((name, tr[name].get("tokens_per_s"), "peer" if name in (peer[1][1], peer[2][1]) else ""))
        print(f"\n  {model}: training tokens/s (mini, global batch {G}, {args.steps} timed steps)")
        print(f"  {'configuration':<34} {'tokens/s':>10}  ours / best PyTorch at the same cores")
        for name, r, note in rows:
            print(f"  {name:<34} {(f'{r:,.0f}' if r else 'failed'):>10}  {note}")
        report["models"][model] = {
            "vocab": vocab, "train_pairs": len(pairs), "global_batch": G, "config": cfg,
            "ours": {str(n): ours[n] for n in ours}, "torch": tr,
            "peer": {str(n): {"config": peer[n][1], "tokens_per_s": peer[n][0]} for n in peer},
            "ratio": {str(n): (ours[n]["tokens_per_s"] / peer[n][0]
                               if ours[n].get("tokens_per_s") and peer[n][0] else None) for n in (1, 2)},
        }
        for n in (1, 2):
            if "error" in ours[n]:
                failed = True
    report["machine"]["load_after"] = open("/proc/loadavg").read().split()[:3]
    print("\nJSON " + json.dumps(report, separators=(",", ":")), flush=True)
    return 1 if failed else 0


def reexec_with_debian_python():
    """`python3` may be another interpreter (pyenv) without Debian's python3-torch: use /usr/bin/python3."""
    import importlib.util
    missing = [m for m in ("torch", "h5py", "numpy") if importlib.util.find_spec(m) is None]
    if not missing:
        return
    debian = "/usr/bin/python3"
    if os.path.realpath(sys.executable) != os.path.realpath(debian) and os.path.exists(debian) \
            and not os.environ.get("TVT_REEXEC"):
        os.environ["TVT_REEXEC"] = "1"
        os.execv(debian, [debian] + sys.argv)
    sys.exit(f"translation_vs_torch: python modules {missing} missing: apt-get install -y python3-torch python3-h5py")


if __name__ == "__main__":
    reexec_with_debian_python()
    sys.exit(main())
