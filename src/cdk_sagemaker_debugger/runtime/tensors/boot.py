"""What the bundle's sitecustomize does for the tensor collector: nothing unless the job configured it; then it
waits for ``import torch`` (a one-shot import hook) and starts the collector right after torch is loaded.

Images without torch, and processes that never import it, pay one environment lookup. Never raises.
"""

import os
import sys

from . import contract

SAMPLER_ROLE = "CDK_SAGEMAKER_SAMPLER_ROLE"  # "daemon" in the sampler's own process


class S3Sink:
    """Uploads the collector's files to ``<S3 URI>/<job>/tensor-output/`` with the sampler's S3 client."""

    def __init__(self, client, bucket, base):
        self.client, self.bucket, self.base = client, bucket, base

    def put(self, relative, path):
        self.client.put(self.bucket, f"{self.base}/{relative}", path)


def sink_from(env, sampler_settings, sampler_s3):
    """(sink or None, node): the job's S3 destination from the sampler's settings (the same URI, job and client)."""
    if sampler_settings is None:
        return None, None
    settings = sampler_settings.from_environment(env)
    if not settings.s3_uri or env.get(contract.UPLOAD, "1").strip() == "0":
        return None, settings.node
    if not settings.job_name:
        raise ValueError("no training job name (TRAINING_JOB_NAME), so no S3 destination; files stay local")
    bucket, prefix = sampler_settings.split_s3_uri(settings.s3_uri)
    base = "/".join(part for part in (prefix, settings.job_name, "tensor-output") if part)
    client = sampler_s3.make_client(settings.uploader, None, settings.endpoint_url, env)
    return S3Sink(client, bucket, base), settings.node


def wanted(env):
    return bool(env.get(contract.CONFIG, "").strip()) and env.get(contract.DISABLED, "").strip() != "1" and \
        env.get(SAMPLER_ROLE) != "daemon"


class _AfterImport:
    """A one-shot meta-path finder: lets the normal finders find ``name``, then runs ``callback`` after it loads."""

    def __init__(self, name, callback):
        self.name, self.callback = name, callback

    def find_spec(self, name, path=None, target=None):
        if name != self.name:
            return None
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass
        import importlib.util

        spec = importlib.util.find_spec(name)
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        original = loader.exec_module

        def exec_module(module):
            original(module)
            loader.exec_module = original
            self.callback()

        loader.exec_module = exec_module
        return spec


def main(sampler_settings=None, sampler_s3=None, env=None):
    env = os.environ if env is None else env
    if not wanted(env):
        return
    from . import api

    try:
        config = contract.parse(env[contract.CONFIG])
        try:
            sink, node = sink_from(env, sampler_settings, sampler_s3)
        except Exception as exc:
            api.say_once("upload", f"uploads off: {type(exc).__name__}: {exc}")
            sink, node = None, None

        def start():
            api.start(config, sink=sink, node=node, env=env)

        if "torch" in sys.modules:
            start()
        else:
            sys.meta_path.insert(0, _AfterImport("torch", start))
    except Exception as exc:
        api.say_once("start", f"not started: {type(exc).__name__}: {exc}")
