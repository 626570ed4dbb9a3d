"""Per-rank phases, the DataLoader wrapper and the heartbeat marks, through the training-script API."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cdk_sagemaker_debugger.runtime.sampler import api, contract, heartbeat, launcher, phases, ranks
from cdk_sagemaker_debugger.runtime.sampler.loader import wrap
from cdk_sagemaker_debugger.runtime.sampler.phases import phase


@pytest.fixture(autouse=True)
def fresh_api(monkeypatch: pytest.MonkeyPatch):
    for name in (contract.S3_URI, contract.DISABLED, contract.FRAMEWORK_EVENTS, "CDK_SAGEMAKER_SAMPLER_LOCAL_DIR",
                 *ranks.RANK_VARIABLES, *ranks.LOCAL_RANK_VARIABLES, "TRAINING_JOB_NAME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(api, "_state", {"settings": None, "writer": None, "checked": False, "counters": {},
                                        "logged": set()})
    monkeypatch.setattr(launcher, "before_stop", [])
    monkeypatch.setattr(heartbeat, "_state", {"path": None, "last": 0.0, "pid": None})
    monkeypatch.setattr(phases, "_ids", {})  # the rank is read once per process
    yield


def events_in(root: Path) -> list:
    found = []
    for path in sorted(root.glob("framework/pevents/*/*.json")):
        found += [(path.name, e) for e in json.loads(path.read_text()) if e.get("ph") == "X"]
    return found


class Loader:
    """Shaped like a DataLoader: iterable, with num_workers and pin_memory, and an attribute of its own."""

    num_workers, pin_memory, batch_size = 0, True, 4

    def __init__(self, n: int):
        self.n = n

    def __iter__(self):
        return iter(range(self.n))

    def __len__(self) -> int:
        return self.n


def test_phases_and_batches_carry_the_rank_from_the_launcher(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("CDK_SAGEMAKER_SAMPLER_LOCAL_DIR", str(tmp_path))
    monkeypatch.setenv("OMPI_COMM_WORLD_RANK", "5")  # mpirun (smddp) rather than torchrun
    monkeypatch.setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1")
    loader = wrap(Loader(3))
    assert len(loader) == 3 and loader.batch_size == 4 and wrap(loader) is loader
    seen = []
    for batch in loader:
        with api.step(), phase("forward"):
            seen.append(batch)
    api.flush()
    assert seen == [0, 1, 2]
    events = events_in(tmp_path)
    assert {name.split("_")[1] for name, _ in events} == {"5-algo-1"}  # the file name's <rank>-<host> token
    kinds = [e["name"] for _, e in events]
    assert kinds.count("forward") == 3 and kinds.count("range_iterator.__next__") == 3  # StopIteration not recorded
    [init] = [e for _, e in events if e["name"] == "DataLoaderIterInitialize"]
    assert init["args"] == {"pid": os.getpid(), "rank": 5, "local_rank": 1, "num_workers": 0, "pin_memory": True,
                            "worker_pids": []}
    forward = next(e for _, e in events if e["name"] == "forward")
    assert forward["args"] == {"pid": os.getpid(), "rank": 5, "local_rank": 1}
    marks = list((tmp_path / heartbeat.HEARTBEAT_DIR).iterdir())
    assert [m.name for m in marks] == [f"5-algo-1.{os.getpid()}"]


def test_nothing_is_written_and_nothing_raises_without_a_sampler(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    for _ in wrap(Loader(2)):
        with phase("data"):
            pass
    assert list(tmp_path.iterdir()) == []


def test_an_exception_in_the_block_passes_through_and_the_phase_is_recorded(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("CDK_SAGEMAKER_SAMPLER_LOCAL_DIR", str(tmp_path))
    with pytest.raises(KeyError):
        with phase("checkpoint"):
            raise KeyError("disk")
    api.flush()
    assert [e["name"] for _, e in events_in(tmp_path)] == ["checkpoint"]


def test_a_normal_exit_is_marked_and_a_process_without_steps_marks_nothing(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("CDK_SAGEMAKER_SAMPLER_LOCAL_DIR", str(tmp_path))
    with api.step():
        pass
    writer = api._writer()
    api._mark_exit(writer)  # what atexit runs first at a normal exit
    writer.close()
    assert [e["name"] for _, e in events_in(tmp_path)] == ["Step:ModeKeys.TRAIN", "exit"]
    fresh = type(writer)(str(tmp_path / "other"), "0-algo-1", log=print)
    api._mark_exit(fresh)
    assert fresh.fd is None and not fresh.queue  # no step ever: no file


def test_local_rank_variables_in_order():
    assert ranks.local_rank({"LOCAL_RANK": "2", "MPI_LOCALRANKID": "7"}) == 2
    assert ranks.local_rank({"MPI_LOCALRANKID": "7"}) == 7 and ranks.local_rank({}) == 0
    assert ranks.rank({"RANK": "x", "PMI_RANK": "9"}) == 9


def test_phases_and_batches_only_queue_and_the_writer_thread_marks_progress(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch):
    """Like step(): no disk I/O on the training thread, not even the heartbeat's utime."""
    import threading
    import time

    monkeypatch.setenv("CDK_SAGEMAKER_SAMPLER_LOCAL_DIR", str(tmp_path))
    marked_by = []
    real_mark = heartbeat.mark
    monkeypatch.setattr(heartbeat, "mark", lambda: (marked_by.append(threading.current_thread().name), real_mark()))
    writes = []
    real_write = os.write
    monkeypatch.setattr(os, "write", lambda fd, data: (writes.append(threading.current_thread().name),
                                                       real_write(fd, data))[1])
    for _ in wrap(Loader(2)):
        with phase("forward"):
            pass
    writer = api._writer()
    assert marked_by == [] and writes == [] and len(writer.queue) == 5  # everything still queued (first drain: 1 s)
    deadline = time.monotonic() + 10
    while writer.queue and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not writer.queue and set(marked_by) == {"cdk-sagemaker-sampler-timeline"}
    assert set(writes) == {"cdk-sagemaker-sampler-timeline"}
    writer.close()
