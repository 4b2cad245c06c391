#!/usr/bin/env python3
"""Writes reference-scale resnet result logs, good and broken, for tests/cli/checker_agreement.sh.

    make_reference_logs.py OUTDIR

Each log is a full MLPerf training 0.7.0 run of ResNet-50 on ImageNet as our trainer would write it
(src/train/trainer.cpp: the same `:::MLLOG {json}` lines, keys in the same order, metadata file and
lineno): closed division, submission_benchmark "resnet" with metadata scale "reference",
train_samples 1281167 / eval_samples 50000, the optimizer keys the 0.7.0 ruleset requires for sgd
(closed_resnet_sgd.yaml) or lars (closed_resnet_lars.yaml) with values from the v0.7 hyperparameter
table, realistic times (init of minutes, epochs of tens of seconds), and evaluations until top-1
first reaches the 0.759 target.

good_<what>.txt    a valid log; the <what> says how it varies (optimizer, batch, cadence, blocks...)
broken_<why>.txt   a good log broken in exactly one way, named by <why>

Python standard library only; the output is the same on every run (seeded).
"""
import json
import math
import os
import random
import struct
import sys

TRAIN_SAMPLES = 1281167
EVAL_SAMPLES = 50000
TARGET = 0.759
INIT_LIMIT_MS = 20 * 60 * 1000  # 0.7.0 common.yaml: init_stop within 20 min of the first init_start

# The trainer's metadata lineno per key (src/train/trainer.cpp), so the logs look like ours.
LINENO = {
    "submission_benchmark": 38, "submission_division": 39, "submission_org": 40, "submission_platform": 41,
    "submission_status": 43, "submission_poc_name": 44, "submission_poc_email": 45, "cache_clear": 348,
    "init_start": 349, "mlperf_dist_config": 360, "seed": 361, "global_batch_size": 362, "train_samples": 363,
    "eval_samples": 364, "model_bn_span": 365, "init_stop": 388, "run_start": 395, "block_start": 131,
    "epoch_start": 132, "epoch_stop": 182, "eval_start": 189, "eval_accuracy": 193, "eval_stop": 194,
    "block_stop": 204, "mlperf_dist_run_summary": 407, "run_stop": 411,
}
STARTS = {"init_start", "run_start", "epoch_start", "block_start", "eval_start"}
STOPS = {"init_stop", "run_stop", "epoch_stop", "block_stop", "eval_stop"}


def f32(x):
    """x as the float32 our trainer holds it in, printed as a double (0.9 -> 0.8999999761581421)."""
    return struct.unpack("f", struct.pack("f", x))[0]


def event(key, value=None, t=0.0, **meta):
    kind = "INTERVAL_START" if key in STARTS else "INTERVAL_END" if key in STOPS else "POINT_IN_TIME"
    return {"t": t, "type": kind, "key": key, "value": value, "meta": meta}


def optimizer_keys(p):
    """The optimizer events the trainer logs (src/train/hyperparams.cpp: hyperparam_log_entries)."""
    steps = math.ceil(TRAIN_SAMPLES / p["batch"])
    decay_steps = round(p["decay_epochs"] * steps)
    if p["opt"] == "lars":
        return [("opt_name", "lars"), ("lars_opt_base_learning_rate", p["lr"]), ("lars_opt_end_learning_rate", 0.0001),
                ("lars_opt_learning_rate_decay_poly_power", 2.0), ("lars_opt_learning_rate_decay_steps", decay_steps),
                ("lars_opt_learning_rate_warmup_epochs", p["warmup"]), ("lars_opt_momentum", p["momentum"]),
                ("lars_opt_weight_decay", p["wd"]), ("lars_epsilon", 0.0)]
    return [("opt_name", "sgd"), ("opt_base_learning_rate", p["lr"]), ("opt_weight_decay", p["wd"]),
            ("opt_momentum", p["momentum"]), ("opt_learning_rate_warmup_epochs", p["warmup"]),
            ("sgd_opt_base_learning_rate", p["lr"]), ("sgd_opt_end_learning_rate", 0.0001),
            ("sgd_opt_learning_rate_decay_poly_power", 2.0), ("sgd_opt_learning_rate_decay_steps", decay_steps),
            ("sgd_opt_weight_decay", p["wd"]), ("sgd_opt_momentum", p["momentum"]),
            ("opt_end_learning_rate", 0.0001), ("opt_learning_rate_decay_steps", decay_steps),
            ("opt_learning_rate_decay_poly_power", 2.0)]


def resolved_config(p):
    """The mlperf_dist_config event: the run's whole resolved config (resnet reference defaults)."""
    c = {"augment_flip": True, "augment_pad": 0, "blocks_per_stage": 3, "bn_momentum": 0.9,
         "global_batch_size": p["batch"], "label_smoothing": 0.1, "lars_epsilon": 0.0,
         "lars_opt_base_learning_rate": 10.0, "lars_opt_end_learning_rate": 0.0001,
         "lars_opt_learning_rate_decay_poly_power": 2.0, "lars_opt_learning_rate_warmup_epochs": 5.0,
         "lars_opt_momentum": 0.9, "lars_opt_trust_coefficient": 0.001, "lars_opt_weight_decay": 0.0001,
         "lr_decay": "poly", "lr_decay_epochs": p["decay_epochs"], "max_epochs": p["max_epochs"],
         "model": "resnet50", "model_bn_span": p["bn_span"], "opt_base_learning_rate": 0.1,
         "opt_end_learning_rate": 0.0001, "opt_learning_rate_decay_boundary_epochs": [30.0, 60.0, 80.0],
         "opt_learning_rate_decay_factor": 0.1, "opt_learning_rate_decay_poly_power": 2.0,
         "opt_learning_rate_warmup_epochs": 5.0, "opt_momentum": 0.9, "opt_name": p["opt"],
         "opt_weight_decay": 0.0001, "seed": p["seed"], "zero_init_residual": True}
    if p["opt"] == "lars":
        c.update({"lars_opt_base_learning_rate": p["lr"], "lars_opt_learning_rate_warmup_epochs": p["warmup"],
                  "lars_opt_momentum": p["momentum"], "lars_opt_weight_decay": p["wd"]})
    else:
        c.update({"opt_base_learning_rate": p["lr"], "opt_learning_rate_warmup_epochs": p["warmup"],
                  "opt_momentum": p["momentum"], "opt_weight_decay": p["wd"]})
    return c


def eval_epochs(p):
    """Epochs evaluated: first at `eval_offset`, then every `eval_every`, up to `epochs` (the last)."""
    out = list(range(p["eval_offset"], p["epochs"] + 1, p["eval_every"]))
    assert out and out[-1] == p["epochs"], p
    return out


def accuracies(p, rng, evals):
    """Top-1 per evaluation: rising, below the target until the last one, which reaches it."""
    last = evals[-1]
    accs = []
    for e in evals[:-1]:
        a = 0.758 - 0.55 * (1 - e / last) ** 1.6 - rng.uniform(0.0005, 0.004)
        accs.append(round(min(a, TARGET - 0.0003), 5))
    accs.append(round(p["final_acc"], 5))
    return accs


def good_events(p):
    """The event list of a complete, valid run with parameters p (see GOOD)."""
    rng = random.Random(p["seed"])
    t = float(p["t0"])
    ev = [event("submission_benchmark", "resnet", t, scale="reference"),
          event("submission_division", "closed", t), event("submission_org", p.get("org", "mlperf-dist"), t),
          event("submission_platform", p["platform"], t), event("submission_status", p.get("status", "onprem"), t),
          event("submission_poc_name", "mlperf-dist", t), event("submission_poc_email", "mlperf-dist@localhost", t),
          event("cache_clear", True, t)]
    init_start = t + 2
    ev.append(event("init_start", None, init_start))
    t = init_start + 0.6 * p["init_s"] * 1000
    if p.get("config_event", True):
        ev.append(event("mlperf_dist_config", resolved_config(p), t))
    for k, v in [("seed", p["seed"]), ("global_batch_size", p["batch"]), ("train_samples", TRAIN_SAMPLES),
                 ("eval_samples", EVAL_SAMPLES), ("model_bn_span", p["bn_span"])] + optimizer_keys(p):
        ev.append(event(k, v, t))
    t = init_start + p["init_s"] * 1000
    ev.append(event("init_stop", None, t))
    t += rng.uniform(20, 300)  # the barrier before the timed region
    run_start = t
    ev.append(event("run_start", None, t))
    evals = eval_epochs(p)
    accs = dict(zip(evals, accuracies(p, rng, evals)))
    epoch_ms = TRAIN_SAMPLES / p["img_per_s"] * 1000
    eval_ms = EVAL_SAMPLES / (3 * p["img_per_s"]) * 1000
    block_first = 1
    for e in range(1, p["epochs"] + 1):
        if p["blocks"] and e == block_first:
            nxt = min(x for x in evals if x >= e)
            ev.append(event("block_start", None, t, epoch_count=nxt - e + 1, first_epoch_num=e))
        ev.append(event("epoch_start", None, t, epoch_num=e))
        t += epoch_ms * rng.uniform(0.97, 1.03) * (1.08 if e == 1 else 1.0)  # the first epoch warms caches
        ev.append(event("epoch_stop", None, t, epoch_num=e))
        if e in accs:
            ev.append(event("eval_start", None, t, epoch_num=e))
            t += eval_ms * rng.uniform(0.95, 1.05)
            ev.append(event("eval_accuracy", accs[e], t, epoch_num=e))
            ev.append(event("eval_stop", None, t, epoch_num=e))
            if p["blocks"]:
                ev.append(event("block_stop", None, t, first_epoch_num=block_first))
                block_first = e + 1
    t += rng.uniform(5, 50)
    if p.get("summary_event", True):
        steps = p["epochs"] * math.ceil(TRAIN_SAMPLES / p["batch"])
        ev.append(event("mlperf_dist_run_summary",
                        {"comm_share": round(rng.uniform(0.05, 0.2), 4), "device": "cuda",
                         "mean_step_ms": round((t - run_start) / steps, 3), "nodes": p["nodes"],
                         "ranks": p["ranks"], "steps": steps, "throughput": p["img_per_s"], "work_unit": "img"}, t))
    ev.append(event("run_stop", None, t, status="success"))
    return ev


def line(e):
    meta = {"file": "src/train/trainer.cpp", "lineno": LINENO.get(e["key"], 366)}
    meta.update(e["meta"])
    j = {"namespace": "", "time_ms": int(round(e["t"])), "event_type": e["type"], "key": e["key"],
         "value": e["value"], "metadata": meta}
    return ":::MLLOG " + json.dumps(j, separators=(",", ":"))


# ---- the good logs: vary optimizer, batch, hyperparameters (v0.7 table), epochs, cadence, blocks ----
def run(name, **kw):
    p = {"opt": "lars", "batch": 3072, "lr": 10.0, "wd": 0.0001, "momentum": 0.9, "warmup": 5.0, "decay_epochs": 41.0,
         "epochs": 40, "eval_every": 4, "eval_offset": 4, "blocks": True, "seed": 1, "init_s": 240.0,
         "img_per_s": 24000.0, "final_acc": 0.7601, "bn_span": 32, "nodes": 1, "ranks": 8,
         "platform": "1xDGX-A100 (8 ranks, cuda)", "max_epochs": 60, "t0": 1593475200000}
    p.update(kw)
    return name, p


GOOD = [
    # LARS, as the v0.7 closed submissions ran it: eval every 4 epochs, our block events.
    run("lars_b3072_e40_eval4_blocks"),
    run("lars_b2048_e36_eval4_noblocks", batch=2048, lr=8.5, warmup=3.0, decay_epochs=37.0, epochs=36, blocks=False,
        seed=7, img_per_s=11500.0, ranks=4, platform="1x4 V100 (4 ranks, cuda)", t0=1593561600000),
    # NVIDIA's v0.7 cadence: first eval at epoch 3, then every 4 (3, 7, 11, ...).
    run("lars_b8192_e39_eval4_offset3_blocks", batch=8192, lr=17.0, warmup=8.0, decay_epochs=42.0, epochs=39,
        eval_offset=3, seed=123, img_per_s=88000.0, nodes=4, ranks=32, platform="4xDGX-A100 (32 ranks, cuda)",
        init_s=400.0, t0=1593648000000),
    # Above 32k batch the table leaves lars momentum free (0.9 only below 32768).
    run("lars_b65536_momentum0.94_e44_eval4", batch=65536, lr=29.0, momentum=0.94, warmup=18.0, decay_epochs=46.0,
        epochs=44, wd=0.00005, seed=2020, img_per_s=590000.0, nodes=64, ranks=512, init_s=870.0,
        platform="64xDGX-A100 (512 ranks, cuda)", t0=1593734400000, status="cloud"),
    run("lars_b16384_wd2e-4_e38_eval2", batch=16384, lr=22.0, wd=0.0002, warmup=12.0, decay_epochs=40.0, epochs=38,
        eval_every=2, eval_offset=2, seed=99, img_per_s=170000.0, nodes=8, ranks=64,
        platform="8xDGX-A100 (64 ranks, cuda)", t0=1593820800000, config_event=False, summary_event=False),
    # Init of 19 min 59 s: just inside the 20-minute limit.
    run("lars_b3072_init_19min59s", init_s=1199.0, seed=5, final_acc=0.7590, t0=1593907200000),
    # SGD, the v0.7 table: lr a multiple of 0.001, weight decay 1e-4 * 2^N, end lr 1e-4.
    run("sgd_b256_lr0.1_wd1e-4_e44_eval4_blocks", opt="sgd", batch=256, lr=0.1, wd=0.0001, momentum=0.9, warmup=0.0,
        decay_epochs=45.0, epochs=44, seed=11, img_per_s=2900.0, ranks=1, platform="1xV100 (1 rank, cuda)",
        init_s=95.0, t0=1593993600000),
    run("sgd_b1024_lr0.4_wd5e-5_e48_eval4_noblocks", opt="sgd", batch=1024, lr=0.4, wd=0.00005, momentum=0.875,
        warmup=2.0, decay_epochs=50.0, epochs=48, blocks=False, seed=12, img_per_s=11000.0, ranks=4,
        platform="1x4 V100 (4 ranks, cuda)", t0=1594080000000),
    run("sgd_b2048_lr0.8_e45_eval1", opt="sgd", batch=2048, lr=0.8, wd=0.0001, warmup=5.0, decay_epochs=46.0,
        epochs=45, eval_every=1, eval_offset=1, seed=13, img_per_s=22000.0, t0=1594166400000),
    # Hyperparameters as the trainer logs them: float32 values printed as doubles.
    run("sgd_b4096_lr1.6_float32_values", opt="sgd", batch=4096, lr=1.6, wd=f32(0.0004), momentum=f32(0.9),
        warmup=f32(0.3), decay_epochs=42.0, epochs=41, eval_every=4, eval_offset=1, seed=14, img_per_s=45000.0,
        nodes=2, ranks=16, platform="2xDGX-A100 (16 ranks, cuda)", t0=1594252800000),
    run("sgd_b512_lr0.256_e47_eval4_offset3", opt="sgd", batch=512, lr=0.256, wd=0.000025, momentum=0.9,
        warmup=1.0, decay_epochs=48.0, epochs=47, eval_offset=3, seed=15, img_per_s=5600.0, ranks=2,
        platform="1x2 V100 (2 ranks, cuda)", status="research", t0=1594339200000),
    run("sgd_b8192_lr3.2_e42_eval2_noblocks", opt="sgd", batch=8192, lr=3.2, wd=0.0001, warmup=5.0,
        decay_epochs=44.0, epochs=42, eval_every=2, eval_offset=2, blocks=False, seed=16, img_per_s=90000.0,
        nodes=4, ranks=32, platform="4xDGX-A100 (32 ranks, cuda)", final_acc=0.7634, t0=1594425600000),
]


# ---- edits that break a good log in one way ----
def drop(key):
    def f(ev):
        out = [e for e in ev if e["key"] != key]
        assert len(out) < len(ev), key
        return out
    return f


def set_value(key, value):
    def f(ev):
        hit = [e for e in ev if e["key"] == key]
        assert hit, key
        for e in hit:
            e["value"] = value
        return ev
    return f


def move_before(key, anchor):
    """Moves the first `key` event to just before the first `anchor` event (times unchanged)."""
    def f(ev):
        i = next(i for i, e in enumerate(ev) if e["key"] == key)
        e = ev.pop(i)
        j = next(j for j, x in enumerate(ev) if x["key"] == anchor)
        ev.insert(j, e)
        return ev
    return f


def move_after(key, anchor):
    def f(ev):
        i = next(i for i, e in enumerate(ev) if e["key"] == key)
        e = ev.pop(i)
        j = next(j for j, x in enumerate(ev) if x["key"] == anchor)
        ev.insert(j + 1, e)
        return ev
    return f


def init_takes(ms):
    """Shifts init_stop and everything after it so that init lasts `ms` (times stay increasing)."""
    def f(ev):
        start = next(e["t"] for e in ev if e["key"] == "init_start")
        i = next(i for i, e in enumerate(ev) if e["key"] == "init_stop")
        shift = start + ms - ev[i]["t"]
        for e in ev[i:]:
            e["t"] += shift
        return ev
    return f


def last_accuracy(value):
    def f(ev):
        [e for e in ev if e["key"] == "eval_accuracy"][-1]["value"] = value
        return ev
    return f


def drop_metadata(key, field, which=0):
    def f(ev):
        e = [e for e in ev if e["key"] == key][which]
        del e["meta"][field]
        return ev
    return f


def set_metadata(key, field, value, which=0):
    def f(ev):
        [e for e in ev if e["key"] == key][which]["meta"][field] = value
        return ev
    return f


def both(first, second):
    def f(ev):
        return second(first(ev))
    return f


def log_twice(key, value):
    """Logs `key` a second time, just after the first, with another value."""
    def f(ev):
        i = next(i for i, e in enumerate(ev) if e["key"] == key)
        again = dict(ev[i], value=value, meta=dict(ev[i]["meta"]))
        ev.insert(i + 1, again)
        return ev
    return f


def set_sgd_lr(value):
    """The trainer logs the SGD base lr under two keys: both get the value."""
    def f(ev):
        return set_value("sgd_opt_base_learning_rate", value)(set_value("opt_base_learning_rate", value)(ev))
    return f


def set_sgd_wd(value):
    def f(ev):
        return set_value("sgd_opt_weight_decay", value)(set_value("opt_weight_decay", value)(ev))
    return f


def truncate_line(key):
    """Writes the first `key` line cut in half: not JSON."""
    def f(ev):
        next(e for e in ev if e["key"] == key)["truncate"] = True
        return ev
    return f


LARS, SGD = GOOD[0][0], GOOD[6][0]
# (name, base good log, edit). Cases where the two checkers are known to disagree by design are not
# here: tests/cli/checker_agreement.sh lists them with the reason.
BROKEN = [
    # a required key missing
    ("missing_run_stop", LARS, drop("run_stop")),
    ("missing_init_stop", GOOD[1][0], drop("init_stop")),
    ("missing_eval_samples", GOOD[2][0], drop("eval_samples")),
    ("missing_train_samples", SGD, drop("train_samples")),
    ("missing_submission_org", GOOD[4][0], drop("submission_org")),
    ("missing_submission_division", GOOD[8][0], drop("submission_division")),
    ("missing_cache_clear", GOOD[5][0], drop("cache_clear")),
    ("missing_opt_name", GOOD[9][0], drop("opt_name")),
    ("missing_sgd_opt_momentum", SGD, drop("sgd_opt_momentum")),
    ("missing_model_bn_span_sgd", GOOD[7][0], drop("model_bn_span")),
    ("missing_opt_learning_rate_warmup_epochs_sgd", GOOD[10][0], drop("opt_learning_rate_warmup_epochs")),
    ("missing_lars_epsilon", LARS, drop("lars_epsilon")),
    ("missing_lars_opt_learning_rate_decay_steps", GOOD[3][0], drop("lars_opt_learning_rate_decay_steps")),
    ("missing_every_eval_accuracy", GOOD[1][0], drop("eval_accuracy")),
    ("missing_init_start", GOOD[3][0], drop("init_start")),
    ("missing_run_start", GOOD[10][0], drop("run_start")),
    ("missing_global_batch_size", GOOD[11][0], drop("global_batch_size")),
    # events in the wrong order
    ("order_run_start_before_init_stop", LARS, move_before("run_start", "init_stop")),
    ("order_init_start_after_init_stop", SGD, move_after("init_start", "init_stop")),
    ("order_block_start_before_run_start", GOOD[2][0], move_before("block_start", "run_start")),
    ("order_run_stop_before_run_start", GOOD[7][0], move_before("run_stop", "run_start")),
    # init_stop too late: the limit is strict (< 20 min)
    ("late_init_stop_25min", LARS, init_takes(25 * 60 * 1000)),
    ("late_init_stop_exactly_20min", SGD, init_takes(INIT_LIMIT_MS)),
    # run_stop's status, and the target
    ("run_stop_without_status", GOOD[4][0], drop_metadata("run_stop", "status")),
    ("target_not_reached", LARS, last_accuracy(0.7552)),
    ("target_not_reached_sgd", GOOD[11][0], last_accuracy(0.7589)),
    ("status_aborted_short_of_target", LARS, both(last_accuracy(0.7301), set_metadata("run_stop", "status", "aborted"))),
    ("status_aborted_short_of_target_sgd", SGD, both(last_accuracy(0.41), set_metadata("run_stop", "status", "aborted"))),
    # hyperparameters outside the v0.7 table
    ("lars_end_lr_2e-4", LARS, set_value("lars_opt_end_learning_rate", 0.0002)),
    ("lars_poly_power_1", GOOD[1][0], set_value("lars_opt_learning_rate_decay_poly_power", 1.0)),
    ("lars_epsilon_1e-9", GOOD[2][0], set_value("lars_epsilon", 1e-9)),
    ("lars_weight_decay_3e-4", LARS, set_value("lars_opt_weight_decay", 0.0003)),
    ("sgd_lr_0.1005_not_multiple_of_0.001", SGD, set_sgd_lr(0.1005)),
    ("sgd_weight_decay_1.5e-4", GOOD[8][0], set_sgd_wd(0.00015)),
    ("sgd_end_lr_0", GOOD[7][0], set_value("sgd_opt_end_learning_rate", 0.0)),
    ("global_batch_size_0", GOOD[8][0], set_value("global_batch_size", 0)),
    # a key that must appear exactly once, logged twice with different values
    ("global_batch_size_twice", LARS, log_twice("global_batch_size", 4096)),
    ("submission_platform_twice", SGD, log_twice("submission_platform", "another system")),
    # submission values
    ("submission_status_invalid", SGD, set_value("submission_status", "internal")),
    ("submission_org_empty", GOOD[3][0], set_value("submission_org", "")),
    # event metadata
    ("eval_accuracy_without_epoch_num", GOOD[9][0], drop_metadata("eval_accuracy", "epoch_num", which=2)),
    ("block_start_epoch_count_0", LARS, set_metadata("block_start", "epoch_count", 0, which=3)),
    ("epoch_start_without_epoch_num", GOOD[1][0], drop_metadata("epoch_start", "epoch_num", which=5)),
    ("eval_stop_without_epoch_num", GOOD[8][0], drop_metadata("eval_stop", "epoch_num", which=7)),
    ("block_stop_without_first_epoch_num", GOOD[2][0], drop_metadata("block_stop", "first_epoch_num", which=1)),
    # a line that is not JSON
    ("malformed_json_line", SGD, truncate_line("eval_samples")),
]


def write(path, ev):
    with open(path, "w") as f:
        for e in ev:
            text = line(e)
            f.write((text[: len(text) // 2] if e.get("truncate") else text) + "\n")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    params = dict(GOOD)
    assert len(params) == len(GOOD), "duplicate good log names"
    for name, p in GOOD:
        write(os.path.join(out, "good_" + name + ".txt"), good_events(p))
    for why, base, edit in BROKEN:
        write(os.path.join(out, "broken_" + why + ".txt"), edit(good_events(params[base])))
    print(f"{len(GOOD)} good and {len(BROKEN)} broken logs in {out}")


if __name__ == "__main__":
    main()
