"""What `zest train` shows of the ranks' output. On a terminal, rank 0's
per-step lines (`step N loss X` and the executable's `progress: ...` line,
--progress) become one line redrawn in place; elsewhere (a pipe, a CI log)
every line is shown as it comes."""

import re
import sys

STEP_LINE = re.compile(r"^step (\d+) loss (\S+)$")
PROGRESS_LINE = re.compile(r"^progress: (.*)$")


class Display:
    def __init__(self, out=None, in_place=None):
        self.out = out or sys.stdout
        self.in_place = self.out.isatty() if in_place is None else in_place
        self.drawn = False
        self.losses = {}

    def line(self, text):
        """One line of the ranks' output (without its newline)."""
        step = STEP_LINE.match(text)
        if step:
            self.losses[int(step.group(1))] = float(step.group(2))
        progress = PROGRESS_LINE.match(text)
        if self.in_place and (step or progress):
            if progress:
                # Carriage return, the line, then clear what a longer
                # previous line left.
                self.out.write("\r" + progress.group(1) + "\x1b[K")
                self.out.flush()
                self.drawn = True
            return
        self.end_line()
        self.out.write(text + "\n")
        self.out.flush()

    def end_line(self):
        """Ends the redrawn line, so that other output starts below it."""
        if self.drawn:
            self.out.write("\n")
            self.drawn = False
