#!/usr/bin/python3
"""Summarises experiments/attention_forms/run.sh: per variant, the test top-1 over seeds
(mean and spread), the training speed, early training (the training loss logged at step
200, the mean over steps 151-200, and the validation accuracy after the first epoch), the entropy of the CLS token's attention per layer at
step 0 and at the end (with model.pool = "mean" there is no CLS token: the mean over every
query row instead), and the mean attention distance per layer at the end (for each patch
query, the attention-weighted distance in patches to the other patches, the CLS column left
out and the row renormalised). Writes results.md (the table between two marker lines, keeping
the rest of an existing file), results.jsonl and grids/<variant>.png."""
import argparse
import json
import math
import os
import re
import shutil

import numpy as np


def layer_statistics(maps_dir, images):
    """Per layer: mean entropy (nats) of the CLS row, or of every row without a CLS token,
    and mean attention distance in patches, averaged over heads and images."""
    entropies, distances = [], []
    for i in range(images):
        att = np.load(os.path.join(maps_dir, str(i), "attention.npy")).astype(np.float64)
        grid = np.load(os.path.join(maps_dir, str(i), "rollout.npy")).shape[0]
        L, H, T, _ = att.shape
        has_cls = T == grid * grid + 1
        p = np.clip(att, 1e-30, 1.0)
        row_entropy = -(att * np.log(p)).sum(-1)  # [L, H, T]
        entropies.append(row_entropy[:, :, 0].mean(1) if has_cls else row_entropy.mean((1, 2)))
        first = 1 if has_cls else 0
        ys, xs = np.divmod(np.arange(grid * grid), grid)
        dist = np.hypot(ys[:, None] - ys[None, :], xs[:, None] - xs[None, :])  # [N, N]
        patches = att[:, :, first:, first:]
        patches = patches / patches.sum(-1, keepdims=True)
        distances.append((patches * dist).sum(-1).mean((1, 2)))
    return np.mean(entropies, 0), np.mean(distances, 0)


def training_speed(log_path):
    with open(log_path) as f:
        found = re.findall(r"\(([0-9.]+) img/s while training\)", f.read())
    return float(found[-1]) if found else math.nan


def early_training(metrics_path, step=200):
    """The training loss of the step line at `step` and the first epoch's validation
    accuracy, from the run's metrics.jsonl."""
    loss, val = math.nan, math.nan
    with open(metrics_path) as f:
        for line in f:
            m = json.loads(line)
            if m.get("type") == "step" and m.get("step") == step:
                loss = m["loss"]
            if m.get("type") == "epoch" and m.get("epoch") == 1:
                val = 100 * m.get("val_acc", math.nan)
    return loss, val


BEGIN = "<!-- summarise.py writes the part from here -->\n"
END = "<!-- to here; the rest of this file is kept as it is -->\n"


def write_table(path, table):
    """Writes the table between the BEGIN and END lines of the results.md at path, keeping
    the text before and after them (the dated entries written by hand); a file without them,
    or no file, becomes the table alone between the two lines."""
    before, after = "", ""
    if os.path.exists(path):
        with open(path) as f:
            text = f.read()
        if BEGIN in text and END in text.split(BEGIN, 1)[1]:
            before, rest = text.split(BEGIN, 1)
            after = rest.split(END, 1)[1]
    with open(path, "w") as f:
        f.write(before + BEGIN + table + END + after)


def fmt_layers(values):
    return " ".join(f"{v:.2f}" for v in values)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("out")
    ap.add_argument("--variants", nargs="+", required=True)
    ap.add_argument("--seeds", nargs="+", required=True)
    ap.add_argument("--images", type=int, default=16)
    args = ap.parse_args()

    rows, records = [], []
    os.makedirs(os.path.join(args.out, "grids"), exist_ok=True)
    for variant in args.variants:
        top1, speed, ent0, ent1, dist1, loss200, val1 = [], [], [], [], [], [], []
        for seed in args.seeds:
            d = os.path.join(args.out, variant, f"seed{seed}")
            with open(os.path.join(d, "run", "eval.json")) as f:
                top1.append(100 * json.load(f)["top1"])
            speed.append(training_speed(os.path.join(d, "train.log")))
            early = early_training(os.path.join(d, "run", "metrics.jsonl"))
            loss200.append(early[0]), val1.append(early[1])
            e0, _ = layer_statistics(os.path.join(d, "maps_init"), args.images)
            e1, m1 = layer_statistics(os.path.join(d, "maps_end"), args.images)
            ent0.append(e0), ent1.append(e1), dist1.append(m1)
            records.append({"variant": variant, "seed": int(seed), "test_top1": top1[-1],
                            "train_img_per_s": speed[-1], "train_loss_step200": loss200[-1],
                            "val_top1_epoch1": val1[-1], "entropy_step0": e0.tolist(),
                            "entropy_end": e1.tolist(), "mean_distance_end": m1.tolist()})
        first = os.path.join(args.out, variant, f"seed{args.seeds[0]}", "maps_end", "0", "grid.png")
        shutil.copyfile(first, os.path.join(args.out, "grids", f"{variant}.png"))
        spread = (max(top1) - min(top1)) / 2
        rows.append(f"| {variant} | {np.mean(top1):.2f} ± {spread:.2f} | {np.mean(speed):.0f} | "
                    f"{np.mean(loss200):.3f} | {np.mean(val1):.2f} | "
                    f"{fmt_layers(np.mean(ent0, 0))} | {fmt_layers(np.mean(ent1, 0))} | "
                    f"{fmt_layers(np.mean(dist1, 0))} |")

    header = (f"Seeds {' '.join(args.seeds)}; maps of the first {args.images} test images. "
              "Entropy in nats, per layer from the first (uniform over 50 tokens: 3.91); "
              "distance in patches, per layer.\n\n"
              "| variant | test top-1 (mean ± half range) | train img/s | train loss, step 200 | "
              "val top-1, epoch 1 | CLS entropy, step 0 | CLS entropy, end | "
              "mean attention distance, end |\n|---|---|---|---|---|---|---|---|\n")
    write_table(os.path.join(args.out, "results.md"), header + "\n".join(rows) + "\n")
    with open(os.path.join(args.out, "results.jsonl"), "w") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")
    print(header + "\n".join(rows))


if __name__ == "__main__":
    main()
