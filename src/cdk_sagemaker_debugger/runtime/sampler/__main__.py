"""``python -m cdk_sagemaker_debugger.sampler``: run the sampler in the foreground (also from the bundle zip).

The launcher starts it this way inside training containers (``--detach --watch-members``: the process forks the
sampler and exits, so the sampler is nobody's child, and the sampler ends with the training's processes);
``cdk-sagemaker-debugger sample`` runs the same loop.
"""

from __future__ import annotations

import argparse
import os
import sys

from . import layout, lock
from .daemon import Daemon
from .settings import SettingsError, add_arguments, settings_from_arguments
from .status import FileLog

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def run(settings, duration_s: float | None, lock_fd: int | None = None, log=None, stderr=None) -> int:
    """Run the loop holding the container's lock; EXIT_FAILED when another sampler already writes there or the
    folder cannot be written (both said on ``stderr``)."""
    own_lock = lock_fd is None
    if own_lock:
        try:
            lock_fd = lock.try_lock(settings.local_dir)
        except OSError as exc:
            (stderr or sys.stderr).write(f"error: cannot write to {settings.local_dir}: {exc.strerror or exc}; "
                                         "choose a writable --out\n")
            return EXIT_FAILED
        if lock_fd is None:
            pid = lock.holder_pid(settings.local_dir)
            (stderr or sys.stderr).write(f"error: another sampler (pid {pid}) is already writing to {settings.local_dir}; "
                             "stop it or choose another --out\n")
            return EXIT_FAILED
    try:
        Daemon(settings, lock_fd=lock_fd, log=log).run(duration_s)
    finally:
        if own_lock:
            os.close(lock_fd)
    return EXIT_OK


def main(argv: list | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cdk_sagemaker_debugger.sampler",
                                     description="Sample system metrics in SageMaker Debugger's layout.")
    add_arguments(parser)
    parser.add_argument("--watch-members", action="store_true",
                        help="end, with Debugger's end markers, once no process of the training is left")
    parser.add_argument("--detach", action="store_true", help="fork the sampler and exit (it is nobody's child)")
    parser.add_argument("--lock-fd", type=int, help="inherited descriptor that holds the lock")
    parser.add_argument("--training-pid", type=int,
                        help="the training process that started the sampler (the hang watch's on_hang=exit ends its "
                        "process group and writes to its log)")
    parser.add_argument("--prune-uploaded", action="store_true", help="delete data files once uploaded")
    args = parser.parse_args(argv)
    try:
        settings = settings_from_arguments(args, watch_members=args.watch_members, prune_uploaded=args.prune_uploaded,
                                           training_pid=args.training_pid)
    except SettingsError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return EXIT_USAGE
    if args.detach and os.fork() > 0:
        os._exit(EXIT_OK)  # the first stage: its starter reaps it now, and the sampler below belongs to nobody
    log = FileLog(os.path.join(settings.local_dir, layout.log_file(settings.node)),
                  None if args.lock_fd is not None else sys.stderr)
    return run(settings, args.duration, args.lock_fd, log)


if __name__ == "__main__":
    sys.exit(main())
