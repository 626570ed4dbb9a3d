"""Node fan-out (shards.py, fanout.py): a job whose nodes were read in shards gets the verdicts and reports of the
single-process evaluation of the same files. The expected values come from ``reading.evaluate_store`` (the CLI's and
the parity tests' path) on the same store, never from the sharded code."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from evaluator_jobs import FIXTURES, report, small_spec, standalone

from cdk_sagemaker_debugger.runtime.evaluator import shards
from cdk_sagemaker_debugger.runtime.evaluator.engine import Evaluator, RuleConfig
from cdk_sagemaker_debugger.runtime.evaluator.fanout import split_nodes
from cdk_sagemaker_debugger.runtime.evaluator.readers import SystemFile
from cdk_sagemaker_debugger.runtime.evaluator.reading import Cursor, evaluate_store, feed, list_new_files, prepare
from cdk_sagemaker_debugger.runtime.evaluator.report import report_files, summary
from cdk_sagemaker_debugger.runtime.evaluator.storage import LocalStore
from cdk_sagemaker_debugger.runtime.evaluator.synthetic import StepSpec, constant, write_job


class ShardedStore:
    """The shards' digests of a store, read node by node (as the shard invocations read them), merged at each file's
    turn (reading.Digests)."""

    def __init__(self, store: LocalStore, evaluator: Evaluator, groups: list[list[SystemFile]]):
        self.digests: dict[str, shards.FileDigest] = {}
        limits = shards.thresholds(evaluator)
        for group in groups:
            origin = evaluator.origin_us
            assert origin is not None
            for digest in shards.digest_files(store, [shards.ShardFile(f.key) for f in group], origin_us=origin,
                                              scan_us=evaluator.scan_us, limits=limits, read_workers=1):
                # the shards hand their digests over as JSON
                self.digests[digest.key] = shards.FileDigest.from_state(json.loads(json.dumps(digest.to_state())))

    def covers(self, file: SystemFile) -> bool:
        return file.key in self.digests

    def apply(self, evaluator: Evaluator, file: SystemFile) -> Any:
        return shards.apply(evaluator, file, self.digests.pop(file.key))


def evaluate_sharded(store: LocalStore, configs: list[RuleConfig], nodes_per_shard: int = 1) -> Evaluator:
    evaluator = Evaluator(configs)
    listing = list_new_files(store, Cursor(), Cursor())
    assert prepare(evaluator, listing)
    nodes = sorted({f.node for f in listing.system})
    groups = [[f for f in listing.system if f.node in nodes[i:i + nodes_per_shard]]
              for i in range(0, len(nodes), nodes_per_shard)]
    sharded = ShardedStore(store, evaluator, groups)
    feed(evaluator, store, listing, final=True, digests=sharded, prepared=True, read_workers=1)
    assert not sharded.digests, "every digest was merged"
    return evaluator


def outputs(evaluator: Evaluator) -> dict[str, Any]:
    """Everything the evaluation delivers: statuses, every report file, the summary with its diagnostics."""
    results = evaluator.results(final=True)
    state = evaluator.to_state()
    return {"statuses": [r.to_status() for r in results], "reports": report_files(results),
            "summary": summary(results, evaluator.diagnostics()),
            # what the rules accumulated, exact floats (the reports round them)
            "rules": state["runs"], "facts": state["facts"], "timeline": state["timeline"],
            "progress": state["progress"]}


def _both(root: Path, configs: list[RuleConfig], nodes_per_shard: int = 1) -> tuple[dict[str, Any], dict[str, Any]]:
    single = outputs(evaluate_store(LocalStore(root), configs, read_workers=1))
    sharded = outputs(evaluate_sharded(LocalStore(root), configs, nodes_per_shard))
    return single, sharded


BOTTLENECKS = [report(), standalone("CPUBottleneck", cpu_threshold=50, threshold=5, patience=10),
               standalone("IOBottleneck", io_threshold=0.5, threshold=5, patience=10)]


def test_the_held_out_real_profiler_files_give_the_single_process_outputs_when_sharded():
    root = FIXTURES / "smdebug_test_resources" / "test_traces"
    single, sharded = _both(root, [report()])
    assert single["summary"]["Diagnostics"]["windows"] > 0  # the fixture has windows to compare
    assert sharded == single


@pytest.mark.parametrize("nodes_per_shard", [1, 2])
def test_a_four_node_job_with_bottlenecks_gives_the_single_process_outputs_when_sharded(tmp_path, nodes_per_shard):
    spec = small_spec(nodes=4, minutes=4, gpu_util=lambda n, d, s, t: 5.0 if s % 3 else 60.0 + n,
                      # values on the thresholds (90 and 50) too: "above" must stay strictly above
                      cpu_util=lambda n, c, s, t: (95.0, 90.0, 50.0, 96.0, 20.0)[(s + c) % 5],
                      io_wait=lambda n, c, s, t: float((s + n) % 3),
                      steps=StepSpec(count=300, duration_s=0.3, slow_steps={150: 3.0}))
    root = write_job(tmp_path / "profiler-output", spec)
    single, sharded = _both(root, BOTTLENECKS, nodes_per_shard)
    statuses = {s["RuleConfigurationName"]: s["RuleEvaluationStatus"] for s in single["statuses"]}
    assert statuses["CPUBottleneck"] == "IssuesFound"  # the bottleneck columns were compared, reduced
    assert sharded == single


def test_damaged_late_and_misplaced_records_are_counted_as_in_one_process(tmp_path):
    root = write_job(tmp_path / "profiler-output", small_spec(nodes=3, minutes=4))
    files = sorted(root.rglob("*.algo-2.json"))
    stamp = json.loads(files[1].read_text().splitlines()[0])["Timestamp"]
    lines = [json.dumps({"Type": "cpu", "Name": "cpu0", "Dimension": "CPUUtilization", "Value": 50.0,
                         "NodeId": "algo-2", "Timestamp": stamp - 400}),  # misplaced: too far from its file's minute
             json.dumps({"Type": "cpu", "Name": "cpu0", "Dimension": "CPUUtilization", "Value": 50.0,
                         "NodeId": "algo-2", "Timestamp": stamp - 60}),  # drifted into the previous window
             "{not json"]
    with files[1].open("a") as out:
        out.write("\n" + "\n".join(lines) + "\n")
    single, sharded = _both(root, [report()])
    assert single["summary"]["Diagnostics"]["bad_lines"] >= 2
    assert sharded == single


def test_sharding_needs_more_bytes_than_the_threshold_and_more_than_one_node():
    files = [SystemFile(60_000_000 * m, f"system/incremental/{m}.algo-{n}.json", f"algo-{n}")
             for m in range(5) for n in (1, 2, 3)]
    sizes = {f.key: 10 for f in files}
    assert split_nodes(files, sizes, fanout_bytes=150, shard_bytes=20) is None
    assert split_nodes([f for f in files if f.node == "algo-1"], sizes, fanout_bytes=1, shard_bytes=20) is None
    split = split_nodes(files, sizes, fanout_bytes=100, shard_bytes=20)
    assert split is not None
    groups, left = split
    assert [{f.node for f in g} for g in groups] == [{"algo-1"}, {"algo-2"}, {"algo-3"}]
    assert left and max(f.timestamp_us for g in groups for f in g) == 2 * 60_000_000  # three minutes at most
    assert [{f.node for f in g} for g in split_nodes(files, sizes, fanout_bytes=1, shard_bytes=60)[0]] == [
        {"algo-1", "algo-2"}, {"algo-3"}]
    zipped = [SystemFile(f.timestamp_us, f.key + ".gz", f.node) for f in files]  # decoding is the work
    assert split_nodes(zipped, {f.key: 1 for f in zipped}, fanout_bytes=150, shard_bytes=20 * 3) is not None


def test_constant_signals_shard_like_one_process():
    with tempfile.TemporaryDirectory() as tmp:
        root = write_job(Path(tmp) / "po", small_spec(nodes=2, minutes=3, gpu_util=constant(3.0)))
        single, sharded = _both(root, [report()])
    assert sharded == single


def test_a_timestamp_split_between_two_files_of_a_node_continues_its_run_as_in_one_process(tmp_path):
    """algo-2 wrote nothing for minute 1, so algo-1's minute-0 and minute-1 files follow each other in the time order
    and the run of a timestamp split between them continues from one file into the next."""
    root = write_job(tmp_path / "profiler-output", small_spec(nodes=2, minutes=3, cores=8,
                                                               cpu_util=lambda n, c, s, t: 10.0 + c * 0.37 + s % 7))
    first, second = sorted(root.rglob("*.algo-1.json"))[:2]
    [gone] = [p for p in root.rglob("*.algo-2.json") if p.name.split(".")[0] == second.name.split(".")[0]]
    gone.unlink()
    lines = first.read_text().splitlines()
    last_cpu = max(i for i, line in enumerate(lines) if '"I/OWaitPercentage"' in line)
    # minute 0 ends in the middle of its last CPU timestamp (the rest of that sample dropped); minute 1 starts with
    # the three I/O-wait records of that timestamp
    first.write_text("\n".join(lines[:last_cpu - 2]) + "\n")
    second.write_text("\n".join(lines[last_cpu - 2:last_cpu + 1]) + "\n" + second.read_text())
    single, sharded = _both(root, [report()])
    assert sharded == single
