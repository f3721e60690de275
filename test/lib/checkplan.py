"""Checks that zestc's memory plan (--report-json) predicted the peaks an
executable measured (its summary line) exactly.

  checkplan.py REPORT.json RUN.log
"""
import json
import re
import sys


def main():
    report = json.load(open(sys.argv[1]))
    log = open(sys.argv[2]).read()
    measured = {
        "predicted_peak_gathered_bytes": int(
            re.search(r"peak gathered parameter bytes per rank (\d+)", log).group(1)),
        "predicted_peak_pool_bytes": int(
            re.search(r"peak pool bytes per rank (\d+)", log).group(1)),
    }
    for key, value in measured.items():
        predicted = report[key]
        if predicted != value:
            sys.exit(f"checkplan: {key} {predicted} but measured {value}")
        print(f"{key} {predicted} == measured")


if __name__ == "__main__":
    main()
