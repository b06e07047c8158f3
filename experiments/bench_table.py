"""Table cells that experiments/scaling/scaling.sh and experiments/threads/threads.sh share:
minivit's images/s beside the PyTorch reference's, from the JSON each benchmark writes, and
the appending of a run's dated entry to results.md and its figures to results.jsonl."""

import json


def whole(value):
    """A rate as a whole number, or "-" where there is none (no PyTorch)."""
    return f"{value:.0f}" if value else "-"


def ratio(a, b):
    return f"{a / b:.1f}x" if b else "-"


def beside_torch(minivit, torch):
    """minivit's training rate, PyTorch's, their ratio, then the same for evaluation."""
    torch = torch or {}
    cells = []
    for key in ("train_img_per_s", "eval_img_per_s"):
        cells += [f"{minivit[key]:.0f}", whole(torch.get(key)), ratio(minivit[key], torch.get(key))]
    return cells


def row(cells):
    return "| " + " | ".join(cells) + " |"


def append_entry(path, lines):
    """Adds the lines, a dated entry of a results.md, at the end of `path`, after a blank line,
    and prints them: earlier entries stay."""
    with open(path, "a") as f:
        f.write("\n" + "\n".join(lines) + "\n")
    print("\n".join(lines))


def append_rows(path, rows, **fields):
    """Adds one JSON line per row to `path`, each with `fields` (the date and commit) first."""
    with open(path, "a") as f:
        for r in rows:
            f.write(json.dumps({**fields, **r}) + "\n")
