"""The bundle: deterministic, importable from a zip, one sampler per container, chains the image's sitecustomize,
and never raises into the process that starts it."""

from __future__ import annotations

import ast
import glob
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from cdk_sagemaker_debugger.runtime import sampler as runtime_sampler
from cdk_sagemaker_debugger.runtime.sampler import contract
from cdk_sagemaker_debugger.runtime.sampler.bundle import write_bundle
from cdk_sagemaker_debugger.runtime.sampler.lock import holder_pid

PACKAGE_DIR = Path(runtime_sampler.__file__).parent


def zip_folder(folder: Path, target: Path) -> Path:
    with zipfile.ZipFile(target, "w") as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                archive.write(path, path.relative_to(folder).as_posix())
    return target


@pytest.fixture(scope="module")
def bundle_zip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("bundle")
    write_bundle(folder)
    return zip_folder(folder, folder.parent / "sampler-bundle.zip")


def interpreters() -> list:
    """This Python, and a Python 3.8 when the machine has one (the oldest the sampler supports)."""
    found = [sys.executable]
    candidates = [shutil.which("python3.8")] + sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.8*/bin/python3.8")))
    for candidate in filter(None, candidates):
        probe = subprocess.run([candidate, "-c", "import sys; print(sys.version_info[:2] == (3, 8))"],
                               capture_output=True, text=True)
        if probe.stdout.strip() == "True":
            return found + [candidate]
    return found


def clean_env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CDK_SAGEMAKER_SAMPLER_", "TRAINING_JOB"))}
    env.update(extra)
    return env


def test_the_bundle_layout_is_exact_and_deterministic(tmp_path: Path):
    write_bundle(tmp_path / "a")
    write_bundle(tmp_path / "b")
    (tmp_path / "b" / "cdk_sagemaker_debugger" / "sampler" / "stale.py").write_text("x = 1\n")
    write_bundle(tmp_path / "b")  # rewriting replaces a previous bundle
    files = {p.relative_to(tmp_path / "a").as_posix(): p.read_bytes() for p in (tmp_path / "a").rglob("*")
             if p.is_file()}
    again = {p.relative_to(tmp_path / "b").as_posix(): p.read_bytes() for p in (tmp_path / "b").rglob("*")
             if p.is_file()}
    assert files == again
    expected = {"sitecustomize.py", "cdk_sagemaker_debugger/__init__.py"}
    expected |= {f"cdk_sagemaker_debugger/sampler/{p.name}" for p in PACKAGE_DIR.glob("*.py")}
    assert set(files) == expected  # no __pycache__, nothing else
    assert files["cdk_sagemaker_debugger/sampler/contract.py"] == (PACKAGE_DIR / "contract.py").read_bytes()
    top = ast.parse(files["cdk_sagemaker_debugger/__init__.py"])  # nothing imported at module level: light to load
    assert not [n for n in top.body if isinstance(n, (ast.Import, ast.ImportFrom))]


def test_writing_over_a_file_is_refused_clearly(tmp_path: Path):
    (tmp_path / "file").write_text("")
    with pytest.raises(NotADirectoryError, match="not a folder"):
        write_bundle(tmp_path / "file")


@pytest.mark.parametrize("python", interpreters())
def test_python_m_runs_the_sampler_from_the_zip(bundle_zip: Path, tmp_path: Path, python: str):
    out = tmp_path / "out"
    result = subprocess.run([python, "-m", "cdk_sagemaker_debugger.sampler", "--out", str(out), "--interval-ms",
                             "100", "--duration", "0.5"], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                            env=clean_env(PYTHONPATH=str(bundle_zip), CDK_SAGEMAKER_SAMPLER_NVML_LIBRARY="none.so"))
    assert result.returncode == 0, result.stderr
    assert len(list(out.glob("system/incremental/*/*.algo-1.json"))) >= 1
    assert "started (pid" in result.stderr


def container_env(bundle_zip: Path, local: Path, image_site: Path, **extra: str) -> dict:
    return clean_env(PYTHONPATH=f"{bundle_zip}{os.pathsep}{image_site}", CDK_SAGEMAKER_SAMPLER_LOCAL_DIR=str(local),
                     CDK_SAGEMAKER_SAMPLER_NVML_LIBRARY="none.so", CDK_SAGEMAKER_SAMPLER_CONFIG_DIR=str(local / "cfg"),
                     CDK_SAGEMAKER_SAMPLER_END_GRACE_S="1", CDK_SAGEMAKER_SAMPLER_SUPERVISE_S="0.3",
                     **{contract.S3_URI: "s3://bucket/profiler", contract.INTERVAL_MS: "100"}, **extra)


def image_sitecustomize(folder: Path) -> Path:
    folder.mkdir()
    (folder / "sitecustomize.py").write_text("import sys\nsys.stderr.write('image sitecustomize ran\\n')\n")
    return folder


def wait_until_unlocked(local: Path, seconds: float = 8.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if holder_pid(str(local)) is None:
            return True
        time.sleep(0.1)
    return False


def test_two_interpreters_start_one_sampler_and_chain_the_images_sitecustomize(bundle_zip: Path, tmp_path: Path):
    local = tmp_path / "local"
    local.mkdir()
    (local / "sampler.lock").write_text("999999\n")  # left by a sampler that died: no process holds the lock
    env = container_env(bundle_zip, local, image_sitecustomize(tmp_path / "image-site"))
    script = "import time\nfrom cdk_sagemaker_debugger import sampler\nwith sampler.step():\n    time.sleep(1.5)\n" \
             "print('trained')\n"
    runs = [subprocess.Popen([sys.executable, "-c", script], env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [run.communicate(timeout=60) for run in runs]
    for run, (stdout, stderr) in zip(runs, outputs, strict=True):
        assert run.returncode == 0 and stdout == "trained\n"
        assert stderr == "image sitecustomize ran\n"  # chained, and not a word from the sampler
    assert wait_until_unlocked(local), "the sampler did not stop after the training's processes ended"
    log = (local / "sampler" / "log-algo-1.txt").read_text()
    assert log.count("started (pid") == 1, log
    assert len(list(local.glob("system/incremental/*/*.algo-1.json"))) >= 1
    assert len(list(local.glob("framework/pevents/*/*_0-algo-1_pythontimeline.json"))) == 2  # one per process


@pytest.mark.parametrize(("variable", "value", "named"), [
    (contract.INTERVAL_MS, "250", contract.INTERVAL_MS),
    (contract.S3_URI, "my-bucket/profiler", contract.S3_URI),
    ("CDK_SAGEMAKER_SAMPLER_LOCAL_DIR", "/proc/not-writable", "/proc/not-writable"),
])
def test_a_broken_configuration_never_raises_into_the_process(bundle_zip: Path, tmp_path: Path, variable: str,
                                                               value: str, named: str):
    env = container_env(bundle_zip, tmp_path / "local", image_sitecustomize(tmp_path / "image-site"))
    env[variable] = value
    result = subprocess.run([sys.executable, "-c", "print('trained')"], env=env, cwd=tmp_path, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0 and result.stdout == "trained\n"
    lines = result.stderr.splitlines()
    assert lines[0] == "image sitecustomize ran"
    assert len(lines) == 2 and named in lines[1] and lines[1].startswith("cdk-sagemaker-debugger sampler: not started")


def test_switched_off_means_no_sampler_and_no_output(bundle_zip: Path, tmp_path: Path):
    env = container_env(bundle_zip, tmp_path / "local", image_sitecustomize(tmp_path / "image-site"))
    env[contract.DISABLED] = "1"
    result = subprocess.run([sys.executable, "-c", "print('trained')"], env=env, cwd=tmp_path, capture_output=True,
                            text=True, timeout=60)
    assert result.stdout == "trained\n" and result.stderr == "image sitecustomize ran\n"
    assert not (tmp_path / "local").exists()
