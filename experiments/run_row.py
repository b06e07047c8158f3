"""One table row for a finished training run: test top-1 on last.safetensors (eval.json), the
last epoch's validation and training accuracy, and the run's img/s while training (the
figure `train` prints last; runs from before the test line carried it show the mean of the
step lines' running rates, marked with a ~).

Usage: python3 run_row.py RUN_DIR NAME RECIPE
"""
import json
import sys

run, name, recipe = sys.argv[1:]
with open(run + "/metrics.jsonl") as f:
    rows = [json.loads(line) for line in f]
epoch = [r for r in rows if r["type"] == "epoch"][-1]
test = [r for r in rows if r["type"] == "test"]
if test and "train_img_per_s" in test[-1]:
    speed = f"{test[-1]['train_img_per_s']:.0f}"
else:
    steps = [r["img_per_s"] for r in rows if r["type"] == "step"]
    speed = f"~{sum(steps) / len(steps):.0f}"
with open(run + "/eval.json") as f:
    top1 = json.load(f)["top1"]
print(f"| {name} | {recipe} | {100 * top1:.2f}% | {100 * epoch['val_acc']:.2f}% | "
      f"{100 * epoch['train_acc']:.2f}% | {speed} |")
