"""Table cells that experiments/scaling.sh and experiments/threads.sh share: minivit's
images/s beside the PyTorch reference's, from the JSON each benchmark writes."""


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


def write_table(path, lines):
    """Writes the table's lines to `path` and prints them."""
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
