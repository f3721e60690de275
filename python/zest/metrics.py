"""`zest train --log-dir DIR`: each step's figures from rank 0's progress
line (the executable's --progress) as one JSON object per line in
DIR/metrics.jsonl and as TensorBoard scalars in DIR's event files (written
by tensorboardX). A resumed run appends to both."""

import json
import os
import re

from .tools import LaunchError

# progress: step 4/10 loss 4.1616 [eval E] [grad norm G] lr 0.1 tokens/s 169688 step 0.2 ms
#   wait 0.0 ms pool peak 0.2 MiB eta 0 s
EVAL_LINE = re.compile(r"^eval step (\d+) loss (\S+)$")
PROGRESS = re.compile(
    r"^progress: step (?P<step>\d+)/\d+ loss (?P<loss>\S+)"
    r"(?: eval (?P<eval>\S+))?(?: grad norm (?P<grad_norm>\S+))? lr (?P<lr>\S+) "
    r"(?P<unit>tokens|samples)/s (?P<rate>\S+) step (?P<step_ms>\S+) ms "
    r"wait (?P<wait_ms>\S+) ms pool peak (?P<pool_mib>\S+) MiB"
)


def parse_progress(text):
    """The figures of one progress line, or None for any other line."""
    match = PROGRESS.match(text)
    if not match:
        return None
    figures = {"step": int(match["step"])}
    for key in ("loss", "lr", "step_ms", "wait_ms", "pool_mib"):
        figures[key] = float(match[key])
    figures[f"{match['unit']}_per_s"] = float(match["rate"])
    if match["grad_norm"] is not None:
        figures["grad_norm"] = float(match["grad_norm"])
    return figures


class MetricsLog:
    """Writes each step's figures as they come."""

    def __init__(self, folder):
        try:
            os.makedirs(folder, exist_ok=True)
            self.jsonl = open(os.path.join(folder, "metrics.jsonl"), "a")
        except OSError as error:
            raise LaunchError(f"--log-dir: cannot write to '{folder}': {error}")
        from tensorboardX import SummaryWriter

        self.events = SummaryWriter(folder)

    def line(self, text, losses):
        """One line of rank 0's output; `losses`: the full losses by step
        read so far (progress.Display's; the progress line rounds them)."""
        evaluation = EVAL_LINE.match(text)
        if evaluation:
            self.write({"step": int(evaluation[1]), "eval_loss": float(evaluation[2])})
            return
        figures = parse_progress(text)
        if figures is None:
            return
        figures["loss"] = losses.get(figures["step"], figures["loss"])
        self.write(figures)

    def write(self, figures):
        """One JSON line, and each figure as a scalar (train/NAME, or
        eval/loss)."""
        self.jsonl.write(json.dumps(figures) + "\n")
        self.jsonl.flush()
        step = figures["step"]
        for key, value in figures.items():
            if key != "step":
                tag = "eval/loss" if key == "eval_loss" else f"train/{key}"
                self.events.add_scalar(tag, value, step)

    def close(self):
        self.jsonl.close()
        self.events.close()
