"""What the bundle's sitecustomize does at every interpreter start in the container: run the image's own
sitecustomize, then each starter in STARTERS (the sampler's: join the training's members and make sure a sampler runs).

The common path (a sampler already runs) costs a few environment lookups, two flocks and one sleeping thread; nothing
here ever raises into the process, a problem costs at most one line on stderr. This module imports nothing at the top
but ``os``, ``sys`` and ``contract``, and parses on Python 3.6, so an older image runs its own sitecustomize and
gets one line instead of a SyntaxError.
"""

import os
import sys

from . import contract

CHAINED_MODULE = "_cdk_sagemaker_debugger_chained_sitecustomize"
LOCAL_DIR = "CDK_SAGEMAKER_SAMPLER_LOCAL_DIR"  # lock.LOCAL_DIR (lock.py needs Python 3.8)
ROLE = "CDK_SAGEMAKER_SAMPLER_ROLE"  # lock.ROLE
OLDEST_PYTHON = (3, 8)


def _say(message):
    try:
        sys.stderr.write(f"cdk-sagemaker-debugger sampler: {message}\n")
    except (OSError, ValueError):
        pass


def next_sitecustomize(our_file):
    """The spec of the sitecustomize Python would have run without ours: the next one on sys.path after our entry."""
    import importlib.machinery

    ours = os.path.abspath(our_file)
    entries = [os.path.abspath(entry or os.getcwd()) for entry in sys.path]
    our_entry = os.path.dirname(ours)
    after = entries[entries.index(our_entry) + 1:] if our_entry in entries else entries
    for entry in after:
        spec = importlib.machinery.PathFinder.find_spec("sitecustomize", [entry])
        if spec is not None and spec.origin and os.path.abspath(spec.origin) != ours:
            return spec
    return None


def chain(our_file):
    """Run the image's own sitecustomize, as site.py would have (an error in it is reported, as site.py does)."""
    spec = next_sitecustomize(our_file)
    if spec is None:
        return
    import importlib.util  # only when there is one: it costs milliseconds at every interpreter start

    module = importlib.util.module_from_spec(spec)
    sys.modules[CHAINED_MODULE] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        _say(f"error in the image's sitecustomize ({spec.origin}): {type(exc).__name__}: {exc}")


def wanted(env):
    """Only in a job that asked for it, not switched off, and not in the sampler's own interpreter."""
    return bool(env.get(contract.S3_URI, "").strip()) and env.get(contract.DISABLED, "").strip() != "1" and \
        env.get(ROLE) != "daemon"


def start_sampler(env):
    """Join the training's members and watch that a sampler runs; start it when none does (this process took the
    lock). The common path (a sampler runs) imports only lock.py and watch.py."""
    if not wanted(env):
        return
    if sys.version_info[:2] < OLDEST_PYTHON:
        _say("not started: Python {}.{} is older than 3.8, the oldest the sampler runs on; the training runs "
             "without it".format(*sys.version_info[:2]))
        return
    from .lock import default_local_dir, try_lock

    local_dir = default_local_dir(env)
    fd = try_lock(local_dir)
    if fd is not None:
        _start_here(env, local_dir, fd)
        return
    from . import watch

    _entry, joined_now = watch.join(local_dir)
    if joined_now:
        watch.watch(local_dir, watch.supervise_seconds(env), lambda lock_fd: _start_here(env, local_dir, lock_fd),
                    _say)


def _start_here(env, local_dir, fd):
    """This process holds the sampler lock: start the sampler (settings and the launcher are imported only now)."""
    try:
        from .settings import SettingsError, from_environment

        settings = from_environment(env, local_dir=local_dir, prune_uploaded=True)
    except SettingsError as exc:
        os.close(fd)
        _say(f"not started: {exc}")
        return
    except BaseException:
        os.close(fd)
        raise
    from . import watch
    from .launcher import ensure_running, reap, start_if_free

    if watch.member(local_dir) is None:
        ensure_running(settings, fd, log=_say)
    else:  # the watch thread of a member: the sampler died
        reap(start_if_free(settings, fd))


#: Called in order at every interpreter start with the environment; each is guarded (a failure costs one line). A
#: collector that starts the same way adds its own function here.
STARTERS = [start_sampler]


def main(our_file):
    try:
        chain(our_file)
    except Exception as exc:
        _say(f"could not run the image's own sitecustomize: {type(exc).__name__}: {exc}")
    env = os.environ
    for starter in STARTERS:
        try:
            starter(env)
        except Exception as exc:
            _say(f"not started: {type(exc).__name__}: {exc} (set {LOCAL_DIR} to a writable folder if it is the folder)")
