"""Checks zestc's report (--report-json) against its schema (docs/Scheduling.md, section 6)
and against what the executable measured (its summary line): peak pool,
pool footprint and gathered bytes exactly, the memory budget if there was one, and, given the
micro-batches per step, the bytes each rank sent per step.

  checkplan.py REPORT.json RUN.log [ACCUM]
"""
import json
import re
import sys

INT = int
OPT_INT = (int, type(None))

# key -> type(s), per object of the schema zest-report/1.
TOP = {
    "schema": str,
    "world_size": INT,
    "mesh": dict,
    "memory_budget_bytes": OPT_INT,
    "budget_holds_device_arguments": bool,
    "units": list,
    "functions": list,
    "predicted_peak_pool_bytes": OPT_INT,
    "predicted_pool_footprint_bytes": OPT_INT,
    "predicted_peak_gathered_bytes": OPT_INT,
}
UNIT = {
    "name": str,
    "kind": str,
    "dtype": str,
    "parameters": list,
    "numel": INT,
    "bytes": INT,
    "shard_bytes": INT,
    "optimizer_state_bytes": INT,
    "accumulator_bytes": INT,
    "prefetch": OPT_INT,
    "decision": str,
    "checkpoint": (str, type(None)),
    "offload": (str, type(None)),
}
FUNCTION = {
    "name": str,
    "collectives": list,
    "sent_bytes_per_rank": INT,
    "argument_bytes": INT,
    "host_argument_bytes": INT,
    "accumulate_for": (str, type(None)),
    "predicted_peak_pool_bytes": OPT_INT,
    "predicted_pool_footprint_bytes": OPT_INT,
    "predicted_peak_gathered_bytes": OPT_INT,
}
MACHINE = {
    "name": str,
    "gemm_gflops": (int, float),
    "vector_gflops": (int, float),
    "memory_gb_per_s": (int, float),
    "kernel_overhead_us": (int, float),
    "link_gb_per_s": (int, float),
    "link_latency_us": (int, float),
    "replica_link_gb_per_s": (int, float, type(None)),
    "replica_link_latency_us": (int, float, type(None)),
}
COST = {
    "compute_us": (int, float),
    "communication_us": (int, float),
    "exposed_communication_us": (int, float),
    "step_us": (int, float),
}
MESH = {"replicas": INT, "shards": INT}
COLLECTIVE = {
    "kind": str,
    "unit": str,
    "units": list,
    "group": str,
    "bytes": INT,
    "sent_bytes_per_rank": INT,
    "received_bytes_per_rank": INT,
    "at": str,
}


def check_object(obj, schema, where):
    for key, kind in schema.items():
        if key not in obj:
            sys.exit(f"checkplan: {where} lacks '{key}'")
        value = obj[key]
        if (isinstance(value, bool) and kind is not bool) or not isinstance(
            value, kind
        ):
            sys.exit(f"checkplan: {where}.{key} = {value!r} is not {kind}")


def check_schema(report):
    check_object(report, TOP, "report")
    if report["schema"] != "zest-report/1":
        sys.exit(f"checkplan: unknown schema {report['schema']}")
    mesh = report["mesh"]
    check_object(mesh, MESH, "mesh")
    if mesh["replicas"] * mesh["shards"] != report["world_size"]:
        sys.exit("checkplan: the mesh does not cover the world")
    for unit in report["units"]:
        check_object(unit, UNIT, "unit")
        if unit["kind"] not in ("sharded", "replicated", "experts"):
            sys.exit(f"checkplan: unit kind {unit['kind']}")
        if unit["decision"] not in ("keep", "re-gather", "replicated", "local"):
            sys.exit(f"checkplan: unit decision {unit['decision']}")
        if unit["checkpoint"] not in (None, "full", "selective"):
            sys.exit(f"checkplan: unit checkpoint {unit['checkpoint']}")
        if unit["offload"] not in (None, "optimizer", "params"):
            sys.exit(f"checkplan: unit offload {unit['offload']}")
    if report.get("machine") is not None:
        check_object(report["machine"], MACHINE, "machine")
    for function in report["functions"]:
        check_object(function, FUNCTION, "function")
        if report.get("machine") is not None:
            check_object(function["cost"], COST, "cost")
        for collective in function["collectives"]:
            check_object(collective, COLLECTIVE, "collective")
            if collective["kind"] not in ("all_gather", "reduce_scatter", "all_reduce"):
                sys.exit(f"checkplan: collective kind {collective['kind']}")
            if collective["group"] not in (
                "world",
                "shard",
                "replica",
                "expert replica",
            ):
                sys.exit(f"checkplan: collective group {collective['group']}")
            names = {unit["name"] for unit in report["units"]}
            if not set(collective["units"]) <= names:
                sys.exit(f"checkplan: collective units {collective['units']}")
            # A unit's own collective names it; a bucket lists 2 or more.
            if (
                collective["units"] not in ([], [collective["unit"]])
                and len(collective["units"]) < 2
            ):
                sys.exit(f"checkplan: bucket {collective['unit']} units")
        total = sum(c["sent_bytes_per_rank"] for c in function["collectives"])
        if total != function["sent_bytes_per_rank"]:
            sys.exit("checkplan: sent_bytes_per_rank is not the sum")
        check_breakdown(function, {unit["name"] for unit in report["units"]})
    # The units' optimizer state and accumulators are arguments of the
    # entry point that holds the most.
    held = sum(
        u["optimizer_state_bytes"] + u["accumulator_bytes"] for u in report["units"]
    )
    if held > max(f["argument_bytes"] for f in report["functions"]):
        sys.exit(
            f"checkplan: the units' state and accumulators {held} exceed the arguments"
        )


def check_breakdown(function, units):
    """The plan's split by kind adds up: at the peak (with the kept
    workspace) to the peak, after each allocation to the pool then; its
    units are the report's (or buckets of them), their shares no more than
    each kind's bytes."""
    if function["predicted_peak_pool_bytes"] is None:
        return
    peak = function["peak_breakdown"]
    kinds = ("gathered_bytes", "gradient_bytes", "other_bytes")
    total = sum(peak[k] for k in kinds) + peak["workspace_bytes"]
    if total != function["predicted_peak_pool_bytes"]:
        sys.exit(f"checkplan: the peak's split {total} is not the peak")
    for name, split in peak["units"].items():
        if name not in units and not name.startswith("bucket"):
            sys.exit(f"checkplan: the peak's split names unit {name}")
    others = peak["others"]
    if (
        len(others) != peak["other_buffers"]
        or sum(b["bytes"] for b in others) != peak["other_bytes"]
    ):
        sys.exit("checkplan: the peak's buffers are not its other_bytes")
    if any(a["bytes"] < b["bytes"] for a, b in zip(others, others[1:])):
        sys.exit("checkplan: the peak's buffers are not largest first")
    for kind in kinds:
        shares = sum(split[kind] for split in peak["units"].values())
        if shares > peak[kind]:
            sys.exit(f"checkplan: the units' {kind} {shares} exceed the peak's")
    pool = function.get("predicted_pool_after_allocation") or []
    series = function["predicted_kinds_after_allocation"]
    if pool and [sum(k) for k in series] != pool:
        sys.exit("checkplan: the split after each allocation is not the pool")


def measured(log, pattern):
    return int(re.search(pattern + r" (\d+)", log).group(1))


def check_argument_placement(report, log):
    """On a GPU target, the arguments on the device and in pinned host
    memory (offload) against the driver's buffers. Only with accumulation
    (ACCUM > 1) and one entry point: without, the driver gives the untouched
    accumulators no memory; with several, it shares buffers among them."""
    found = re.search(
        r"device memory: argument bytes per rank (\d+) on the device, "
        r"(\d+) in pinned host memory",
        log,
    )
    if not found or len(report["functions"]) != 1:
        return
    function = report["functions"][0]
    host = function["host_argument_bytes"]
    predicted = (function["argument_bytes"] - host, host)
    if predicted != (int(found.group(1)), int(found.group(2))):
        sys.exit(
            f"checkplan: arguments {predicted} (device, host) predicted but "
            f"{found.groups()} measured"
        )
    print(f"argument bytes on the device and host {predicted} == measured")


def main():
    report = json.load(open(sys.argv[1]))
    log = open(sys.argv[2]).read()
    check_schema(report)
    peaks = {
        "predicted_peak_gathered_bytes": measured(
            log, "peak gathered parameter bytes per rank"
        ),
        "predicted_peak_pool_bytes": measured(log, "peak pool bytes per rank"),
        "predicted_pool_footprint_bytes": measured(
            log, "pool footprint bytes per rank"
        ),
    }
    for key, value in peaks.items():
        predicted = report[key]
        if predicted != value:
            sys.exit(f"checkplan: {key} {predicted} but measured {value}")
        print(f"{key} {predicted} == measured")
    budget = report["memory_budget_bytes"]
    if budget is not None:
        # The budget holds the pool's footprint, and on a GPU the
        # arguments on the device too.
        held = report["predicted_pool_footprint_bytes"]
        if report["budget_holds_device_arguments"]:
            held = max(
                f["predicted_pool_footprint_bytes"]
                + f["argument_bytes"]
                - f["host_argument_bytes"]
                for f in report["functions"]
            )
        if held > budget:
            sys.exit(f"checkplan: footprint {held} over the budget of {budget}")
        print(f"predicted footprint {held} <= memory_budget_bytes {budget}")
    if len(sys.argv) > 3 and int(sys.argv[3]) > 1:
        check_argument_placement(report, log)
    if len(sys.argv) > 3:
        # The step runs the (one) training function once per micro-batch;
        # the driver then averages the loss (an f64 all-reduce).
        accum = int(sys.argv[3])
        world = report["world_size"]
        # With no-sync, all micro-batches but the last run the step's
        # accumulate entry point.
        # A forward-only entry (zest-import --forward) follows the step in
        # the module: the first of each kind is the one the driver runs.
        per_call = {}
        for f in report["functions"]:
            per_call.setdefault(
                f["accumulate_for"] is not None, f["sent_bytes_per_rank"]
            )
        step = per_call[False]
        predicted = (
            step + (accum - 1) * per_call.get(True, step) + 2 * 8 * (world - 1) // world
        )
        sent = measured(log, "bytes sent per step per rank")
        if predicted != sent:
            sys.exit(
                f"checkplan: {predicted} bytes sent per step predicted "
                f"but {sent} measured"
            )
        print(f"bytes sent per step per rank {predicted} == measured")
        check_exchanges(report, log, accum)


def check_exchanges(report, log, accum):
    """Expert parallelism: rank 0's all-to-all bytes per step within the
    report's bounds (the rows sent back depend on the routing)."""
    bounds = next(
        (
            f["exchange_sent_bytes_per_rank"]
            for f in report["functions"]
            if f["accumulate_for"] is None
        ),
        None,
    )
    if bounds is None:
        return
    low, high = accum * bounds["at_least"], accum * bounds["at_most"]
    sent = measured(log, "all-to-all bytes sent per step per rank")
    if not low <= sent <= high:
        sys.exit(f"checkplan: {sent} all-to-all bytes sent, not in [{low}, {high}]")
    print(f"all-to-all bytes sent per step {sent} in [{low}, {high}]")


if __name__ == "__main__":
    main()
