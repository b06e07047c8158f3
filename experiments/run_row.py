"""One table row for a finished training run: test top-1 on last.safetensors (eval.json), the
last epoch's validation and training accuracy, and the mean training speed (metrics.jsonl).

Usage: python3 run_row.py RUN_DIR NAME RECIPE
"""
import json
import sys

run, name, recipe = sys.argv[1:]
with open(run + "/metrics.jsonl") as f:
    rows = [json.loads(line) for line in f]
epoch = [r for r in rows if r["type"] == "epoch"][-1]
speed = [r["img_per_s"] for r in rows if r["type"] == "step"]
with open(run + "/eval.json") as f:
    top1 = json.load(f)["top1"]
print(f"| {name} | {recipe} | {100 * top1:.2f}% | {100 * epoch['val_acc']:.2f}% | "
      f"{100 * epoch['train_acc']:.2f}% | {sum(speed) / len(speed):.0f} |")
