"""The sampler inside someone else's container, with real processes: launchers that reap every child, an image with
its own PYTHONPATH and sitecustomize, training processes that end by SIGTERM or os._exit, a sampler that is killed,
a short-lived first process, Python 3.6, an installed library next to the bundle."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest
from sampler_fakes import bundle_zip as make_bundle_zip

from cdk_sagemaker_debugger.constructs.sampler import Sampler
from cdk_sagemaker_debugger.runtime.sampler.layout import PARTIAL_DIR
from cdk_sagemaker_debugger.runtime.sampler.lock import holder_pid

CHANNEL = "/opt/ml/input/data/cdk-sagemaker-sampler"


@pytest.fixture(scope="module")
def bundle_zip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_bundle_zip(tmp_path_factory.mktemp("bundle") / "bundle-container.zip")


def job_env(bundle_zip: Path, local: Path, python_path: str | None = None, **extra: str) -> dict:
    """The container's environment as the construct writes it (Sampler.environment), the bundle at its real path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CDK_SAGEMAKER_SAMPLER_", "TRAINING_JOB"))}
    env.pop("PYTHONPATH", None)
    user = {"PYTHONPATH": python_path} if python_path else {}
    written = Sampler(interval_millis=100).environment(types.SimpleNamespace(asset_hash="bundle"), "s3://bucket/p",
                                                       user)
    env.update(written, PYTHONPATH=written["PYTHONPATH"].replace(f"{CHANNEL}/bundle.zip", str(bundle_zip)))
    env.update(CDK_SAGEMAKER_SAMPLER_LOCAL_DIR=str(local), CDK_SAGEMAKER_SAMPLER_NVML_LIBRARY="none.so",
               CDK_SAGEMAKER_SAMPLER_CONFIG_DIR=str(local / "cfg"), CDK_SAGEMAKER_SAMPLER_END_GRACE_S="1",
               CDK_SAGEMAKER_SAMPLER_SUPERVISE_S="0.3", PATH=os.environ["PATH"])
    env.update(extra)
    return env


def wait_for(predicate, seconds: float = 20.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def status_of(local: Path) -> dict:
    return json.loads((local / "sampler" / "status-algo-1.json").read_text())


def timeline_events(local: Path) -> list:
    events = []
    for path in sorted(local.glob("framework/pevents/*/*.json")):
        events += [e for e in json.loads(path.read_text()) if e.get("ph") == "X"]
    return events


def step_events(local: Path) -> list:
    """The step events (a process that exits normally also writes its Process:exit event)."""
    return [e for e in timeline_events(local) if e["name"].startswith("Step:")]


def run(command: list, env: dict, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess:
    process = subprocess.Popen(command, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        raise AssertionError(f"{command} still ran after {timeout} s (waiting for the sampler?)") from None
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


TRAIN = "import time\nfrom cdk_sagemaker_debugger import sampler\nfor i in range(3):\n    with sampler.step():\n" \
        "        time.sleep(0.2)\nprint('trained')\n"
LAUNCHER = f"""
import os, subprocess, sys
subprocess.Popen([sys.executable, "-c", {TRAIN!r}])
while True:  # a launcher that reaps every child until none is left
    try:
        os.wait()
    except ChildProcessError:
        break
print("all children reaped")
"""
SUBREAPER = """
import ctypes, os, sys
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER, kept across exec: orphans come to this process
os.execve(sys.executable, [sys.executable, "-c", sys.argv[1]], json.loads(sys.argv[2]))
""".replace("import ctypes, os, sys", "import ctypes, json, os, sys")


def test_a_launcher_that_reaps_every_child_finishes_and_the_sampler_ends_with_markers(bundle_zip, tmp_path):
    local = tmp_path / "local"
    result = run([sys.executable, "-c", LAUNCHER], job_env(bundle_zip, local), tmp_path)
    assert result.returncode == 0 and result.stdout == "trained\nall children reaped\n", result.stderr
    assert wait_for(lambda: holder_pid(str(local)) is None), "the sampler did not end with the training"
    status = status_of(local)
    assert status["stopped_because"].startswith("the training ended: no process of the training")
    assert (local / "system/training_job_end.ts").exists() and (local / "framework/training_job_end.ts").exists()
    assert len(step_events(local)) == 3
    assert [e["name"] for e in timeline_events(local)].count("exit") == 1  # the training's normal exit, marked


def test_a_subreaper_launcher_that_waits_for_the_sampler_alone_is_released(bundle_zip, tmp_path):
    """The launcher is the container's init in effect: the detached sampler is reparented to it."""
    local = tmp_path / "local"
    env = job_env(bundle_zip, local, CDK_SAGEMAKER_SAMPLER_END_GRACE_S="600")  # the members alone would wait
    lingering = LAUNCHER + "import time\ntime.sleep(1.5)  # still a member: its watch must not restart the sampler\n"
    result = run([sys.executable, "-c", SUBREAPER, lingering, json.dumps(env)], env, tmp_path)
    assert result.returncode == 0 and result.stdout == "trained\nall children reaped\n", result.stderr
    status = status_of(local)
    assert "waits for it alone" in status["stopped_because"]
    assert (local / "system/training_job_end.ts").exists()
    assert (local / "sampler" / "log-algo-1.txt").read_text().count("started (pid") == 1


def test_an_image_with_its_own_pythonpath_and_sitecustomize_keeps_both(bundle_zip, tmp_path):
    image = tmp_path / "opt-ml-code"
    image.mkdir()
    (image / "imagelib.py").write_text("VALUE = 'from the image'\n")
    (image / "sitecustomize.py").write_text("import sys\nsys.stderr.write('image sitecustomize ran\\n')\n")
    local = tmp_path / "local"
    # The training waits (at most 30 s) for the sampler's first sample: on a loaded machine the sampler may start
    # after a 0.6 s training has ended, and then rightly samples nothing.
    pattern = str(local / PARTIAL_DIR / "*.json")
    first_sample = (f"import glob, time\nend = time.monotonic() + 30\nwhile not glob.glob({pattern!r}) and "
                    "time.monotonic() < end:\n    time.sleep(0.05)\n")
    script = "import imagelib\n" + first_sample + TRAIN + "print(imagelib.VALUE)\n"
    result = run([sys.executable, "-c", script], job_env(bundle_zip, local, python_path=str(image)), tmp_path)
    assert result.returncode == 0 and result.stdout == "trained\nfrom the image\n"
    assert result.stderr == "image sitecustomize ran\n"
    assert wait_for(lambda: holder_pid(str(local)) is None)
    assert list(local.glob("system/incremental/*/*.algo-1.json")) and len(step_events(local)) == 3


ENDS = {
    "sigterm": "import os, signal\nos.kill(os.getpid(), signal.SIGTERM)\n",  # StopTrainingJob, spot interruptions
    "os._exit": "import os\nos._exit(0)\n",
    "fork worker": "import os\npid = os.fork()\nif pid == 0:\n    for i in range(4):\n        with sampler.step(100 + i):\n"
                   "            pass\n    time.sleep(1.3)\n    os._exit(0)\nos.waitpid(pid, 0)\nos._exit(0)\n",
}


@pytest.mark.parametrize("end", sorted(ENDS))
def test_step_events_of_a_process_that_ends_without_atexit_are_recovered(bundle_zip, tmp_path, end: str):
    local = tmp_path / "local"
    script = ("import time\nfrom cdk_sagemaker_debugger import sampler\nfor i in range(5):\n    with sampler.step(i):\n"
              "        pass\ntime.sleep(1.3)\n") + ENDS[end]  # the writer thread has written the events by then
    result = run([sys.executable, "-c", script], job_env(bundle_zip, local), tmp_path)
    assert result.returncode == (-signal.SIGTERM if end == "sigterm" else 0), result.stderr
    assert wait_for(lambda: holder_pid(str(local)) is None)
    numbers = sorted(int(e["args"]["step_num"]) for e in step_events(local))
    assert numbers == (list(range(5)) + ([100, 101, 102, 103] if end == "fork worker" else []))
    assert not list(local.glob(".partial/*timeline*"))
    assert status_of(local)["counts"]["recovered_timelines"] >= 1


def test_a_killed_sampler_is_replaced_and_its_death_recorded(bundle_zip, tmp_path):
    local = tmp_path / "local"
    script = "import time\nfrom cdk_sagemaker_debugger import sampler\nend = time.time() + 5\nwhile time.time() < end:\n" \
             "    with sampler.step():\n        time.sleep(0.05)\n"
    training = subprocess.Popen([sys.executable, "-c", script], env=job_env(bundle_zip, local), cwd=tmp_path)
    try:
        assert wait_for(lambda: holder_pid(str(local)) is not None)
        first = holder_pid(str(local))
        time.sleep(1.0)
        killed_at = time.time()
        os.kill(first, signal.SIGKILL)  # the OOM killer, or a cleanup that kills processes
        assert wait_for(lambda: holder_pid(str(local)) not in (None, first)), "no sampler replaced the killed one"
        assert training.wait(timeout=30) == 0
    finally:
        training.kill()
    assert wait_for(lambda: holder_pid(str(local)) is None)
    status = status_of(local)
    assert status["failures"]["sampler_died"] == 1 and status["counts"]["samplers_replaced"] == 1
    assert status["replaced"]["pid"] == first
    records = [json.loads(line) for path in local.glob("system/incremental/*/*.json")
               for line in path.read_text().splitlines()]
    assert any(r["Timestamp"] < killed_at for r in records)  # the dead sampler's partial minute was kept
    assert not list(local.glob(".partial/*.algo-1.json"))


def test_a_short_lived_first_process_neither_waits_nor_takes_the_sampler_with_it(bundle_zip, tmp_path):
    """`python -c` before the training, with an S3 that never answers: the sampler it started stays for the training."""
    import socket

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # accepts connections, never answers: an unreachable S3 endpoint
    local = tmp_path / "local"
    env = job_env(bundle_zip, local, TRAINING_JOB_NAME="job", AWS_ENDPOINT_URL_S3=f"http://127.0.0.1:"
                  f"{silent.getsockname()[1]}", AWS_ACCESS_KEY_ID="x", AWS_SECRET_ACCESS_KEY="x",
                  AWS_DEFAULT_REGION="us-east-1", CDK_SAGEMAKER_SAMPLER_END_GRACE_S="30")
    sampler_pid = None
    try:
        assert run([sys.executable, "-c", "print('checked')"], env, tmp_path).stdout == "checked\n"
        assert wait_for(lambda: holder_pid(str(local)) is not None, 10)
        sampler_pid = holder_pid(str(local))
        began = time.time()
        result = run([sys.executable, "-c", TRAIN], env, tmp_path)
        ended = time.time()
        assert result.returncode == 0 and result.stderr == ""
        assert holder_pid(str(local)) == sampler_pid  # the same sampler served the training, and still runs
        assert len(step_events(local)) == 3

        def sampled_while_training() -> bool:  # the sampler writes its buffer on its own cadence: wait for it
            for path in local.glob("**/*.algo-1.json"):
                for line in path.read_text().splitlines():
                    try:
                        if began <= json.loads(line)["Timestamp"] <= ended:
                            return True
                    except (ValueError, KeyError, TypeError):  # a line still being written
                        continue
            return False

        assert wait_for(sampled_while_training, 15)  # sampled while the training ran
        log = (local / "sampler" / "log-algo-1.txt").read_text()
        assert log.count("started (pid") == 1
    finally:
        silent.close()
        if sampler_pid is not None:
            os.kill(sampler_pid, signal.SIGKILL)


def python36() -> str | None:
    candidates = [shutil.which("python3.6"), *sorted(str(p) for p in Path.home().glob(".pyenv/versions/3.6*/bin/python3.6"))]
    for candidate in filter(None, candidates):
        probe = subprocess.run([candidate, "-c", "import sys; print(sys.version_info[:2] == (3, 6))"],
                               capture_output=True, text=True)
        if probe.stdout.strip() == "True":
            return candidate
    return None


def test_python_36_runs_an_instrumented_script_unchanged(bundle_zip, tmp_path):
    python = python36()
    if python is None:
        pytest.skip("no Python 3.6 on this machine (pyenv install 3.6 to run this test)")
    image = tmp_path / "image"
    image.mkdir()
    (image / "sitecustomize.py").write_text("import sys\nsys.stderr.write('image sitecustomize ran\\n')\n")
    env = job_env(bundle_zip, tmp_path / "local", python_path=str(image))
    result = run([python, "-c", TRAIN.replace("for i in range(3)", "for i in range(2)")], env, tmp_path)
    assert result.returncode == 0 and result.stdout == "trained\n", result.stderr
    lines = result.stderr.splitlines()
    assert lines[0] == "image sitecustomize ran" and "older than 3.8" in lines[1] and len(lines) == 3


def test_an_installed_library_is_not_shadowed_by_the_bundle(bundle_zip, tmp_path):
    # the library is installed in this interpreter's site-packages, after PYTHONPATH, where the bundle is
    env = job_env(bundle_zip, tmp_path / "local", CDK_SAGEMAKER_SAMPLER_DISABLED="1")
    code = ("import cdk_sagemaker_debugger\nfrom cdk_sagemaker_debugger import rules, sampler\n"
            "print(cdk_sagemaker_debugger.__version__, rules.__name__, callable(sampler.step))\n")
    result = run([sys.executable, "-c", code], env, tmp_path)
    assert result.returncode == 0, result.stderr
    from cdk_sagemaker_debugger import __version__

    assert result.stdout.split() == [__version__, "cdk_sagemaker_debugger.rules", "True"]
    cli = run([sys.executable, "-m", "cdk_sagemaker_debugger.cli", "rules"], env, tmp_path)
    assert cli.returncode == 0 and "LowGPUUtilization" in cli.stdout, cli.stderr
