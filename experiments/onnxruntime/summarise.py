#!/usr/bin/python3
"""The results.md entry of one ort_compare.sh run, from the JSON files it left in its work
folder: top-1 of both sides, then throughput and latency, a row per round with that round's
ratios, and the best of the rounds.

usage: summarise.py WORK ROUNDS --date D --commit C --cpu TEXT --command TEXT --node VERSION
"""
import argparse
import json
import os
import sys

# What the comparison asks of minivit: at least 3x ORT's evaluation images/s, at most half
# its batch-1 latency.
THROUGHPUT_TARGET = 3.0
LATENCY_TARGET = 0.5


def load(work, name):
    path = os.path.join(work, name)
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        print("error: %s: expected the JSON an earlier step of ort_compare.sh writes: %s"
              % (path, e), file=sys.stderr)
        sys.exit(2)


def span(values, fmt):
    lo, hi = min(values), max(values)
    return (fmt % lo) if fmt % lo == fmt % hi else "%s-%s" % (fmt % lo, fmt % hi)


def met_in(ratios, met):
    return "met in %d of %d rounds" % (sum(1 for r in ratios if met(r)), len(ratios))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("work")
    ap.add_argument("rounds", type=int)
    for key in ("date", "commit", "cpu", "command", "node"):
        ap.add_argument("--" + key, required=True)
    args = ap.parse_args()

    manifest = load(os.path.join(args.work, "model"), "manifest.json")
    check = load(args.work, "ort_check.json")
    evaluation = load(args.work, "minivit_eval.json")
    floor = load(args.work, "ort_floor.json")
    rounds = [(load(args.work, "bench_%d.json" % r), load(args.work, "ort2_%d.json" % r),
               load(args.work, "ort1_%d.json" % r)) for r in range(1, args.rounds + 1)]
    latency2 = [load(args.work, "latency2_%d.json" % r) for r in range(1, args.rounds + 1)]
    bench0, ort0, _ = rounds[0]
    form = manifest["form"]
    n = evaluation["n"]
    mv_correct = round(evaluation["top1"] * n)

    out = []
    w = out.append
    w("## %s, %s: minivit against ONNX Runtime %s" % (args.date, args.commit, check["ort_version"]))
    w("")
    w("- CPU: %s; minivit's product kernels: %s." % (args.cpu, bench0["gemm_kernels"]))
    w("- Model: `%s` (%d parameters: %d blocks of width %d, %d heads, MLP %d, %s attention, "
      "%s position embedding, %s pooling, %d patches of %d pixels a side), exported by torch %s "
      "at opset %d (`export_onnx.py`, the model of `tests/reference/vit_model.py`)."
      % (manifest["checkpoint"], manifest["params"], form["depth"], form["dim"], form["heads"],
         form["mlp_dim"], form["attention"], form["pos_embed"], form["pool"],
         (form["image_size"] // form["patch_size"]) ** 2, form["patch_size"], manifest["torch"],
         manifest["opset"]))
    w("- Command: `%s`." % args.command)
    w("- ONNX Runtime: onnxruntime-node %s from npm, CPU provider, `graphOptimizationLevel: "
      "'all'`, one inter-op thread, sequential execution, Node %s. minivit: `bench --config %s "
      "--set train.threads=2` with `GOMP_SPINCOUNT=10000`, %d evaluation batches, and its "
      "2-thread latency from a second `bench --steps 1 --latency-threads 2`. Both on the same "
      "2 cores (taskset), alternating, one round = minivit then ONNX Runtime."
      % (check["ort_version"], args.node,
         manifest["config"], bench0["steps"]))
    w("- Top-1 on the %d test images: minivit `eval` %.2f%% (%d), ONNX Runtime %.2f%% (%d); "
      "logits of the first %d, torch against ONNX Runtime: max abs diff %.2e."
      % (n, 100 * evaluation["top1"], mv_correct, 100 * check["top1"], check["correct"],
         check["probe_images"], check["probe_max_abs_diff"]))
    w("")

    # Throughput: batch train.batch_size, 2 threads on both sides.
    w("Evaluation at batch %d, 2 threads (images/s; ONNX Runtime over %d batches after %d "
      "untimed):" % (manifest["batch_size"], ort0["runs"], ort0.get("warmup", 0)))
    w("")
    w("| round | minivit | ONNX Runtime | minivit / ONNX Runtime |")
    w("|---|---|---|---|")
    tp_ratios = []
    for r, (bench, ort2, _) in enumerate(rounds, 1):
        ratio = bench["eval_img_per_s"] / ort2["eval_img_per_s"]
        tp_ratios.append(ratio)
        w("| %d | %.0f | %.0f | %.2fx |" % (r, bench["eval_img_per_s"], ort2["eval_img_per_s"],
                                           ratio))
    w("| best of %d | %.0f | %.0f | %s (same-round ratios) |"
      % (len(rounds), max(b["eval_img_per_s"] for b, _, _ in rounds),
         max(o["eval_img_per_s"] for _, o, _ in rounds), span(tp_ratios, "%.2fx")))
    w("")

    # Latency: each side on 1 thread and on 2 (minivit's second bench, --latency-threads 2).
    w("Batch-1 latency, median (p99) in ms over %d images after %d untimed, each side on 1 "
      "thread and on 2:" % (ort0["latency_images"], ort0.get("latency_warmup", 0)))
    w("")
    w("| round | minivit, 1 thread | ONNX Runtime, 1 thread | minivit, 2 threads | "
      "ONNX Runtime, 2 threads | minivit / ORT, 1 thread | minivit / ORT, 2 threads |")
    w("|---|---|---|---|---|---|---|")
    lat1, lat2 = [], []
    for r, ((bench, ort2, ort1), two) in enumerate(zip(rounds, latency2), 1):
        lat1.append(bench["latency_median_ms"] / ort1["latency_median_ms"])
        lat2.append(two["latency_median_ms"] / ort2["latency_median_ms"])
        w("| %d | %.3f (%.3f) | %.3f (%.3f) | %.3f (%.3f) | %.3f (%.3f) | %.2fx | %.2fx |"
          % (r, bench["latency_median_ms"], bench["latency_p99_ms"], ort1["latency_median_ms"],
             ort1["latency_p99_ms"], two["latency_median_ms"], two["latency_p99_ms"],
             ort2["latency_median_ms"], ort2["latency_p99_ms"], lat1[-1], lat2[-1]))
    w("| best of %d | %.3f | %.3f | %.3f | %.3f | %s | %s |"
      % (len(rounds), min(b["latency_median_ms"] for b, _, _ in rounds),
         min(o["latency_median_ms"] for _, _, o in rounds),
         min(t["latency_median_ms"] for t in latency2),
         min(o["latency_median_ms"] for _, o, _ in rounds), span(lat1, "%.2fx"),
         span(lat2, "%.2fx")))
    w("")
    w("- Target, evaluation at least %gx ONNX Runtime's: %s." % (
        THROUGHPUT_TARGET, met_in(tp_ratios, lambda x: x >= THROUGHPUT_TARGET)))
    w("- Target, latency at most %gx ONNX Runtime's: on 1 thread each %s; on 2 threads each "
      "%s." % (LATENCY_TARGET, met_in(lat1, lambda x: x <= LATENCY_TARGET),
               met_in(lat2, lambda x: x <= LATENCY_TARGET)))
    w("- What one call through Node's binding costs with nothing to compute (`floor.onnx`, "
      "batch 1, 1 thread): median %.3f ms, p99 %.3f ms; it is part of every ONNX Runtime "
      "latency above." % (floor["latency_median_ms"], floor["latency_p99_ms"]))
    print("\n".join(out))


if __name__ == "__main__":
    main()
