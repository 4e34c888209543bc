"""The torch.distributed backend "spark" (torch 2.x); importing this module registers it.

    import torch.distributed as dist
    import libspark.torch
    dist.init_process_group("spark")              # under sparkrun: RANK, WORLD_SIZE, MASTER_* set
    dist.init_process_group("cpu:spark,cuda:nccl") # CPU tensors over spark, CUDA ones over NCCL
    dist.all_reduce(t)

Every process group (the default one, each dist.new_group, each DeviceMesh dimension) wires up
its own libspark communicator over the c10d Store torch hands in. Each call returns a Work at
once; the operations of a group run in call order on its progress thread (async_op=True
overlaps them with the caller's work). A failure (timeout, a peer that left) finishes the Work
and its future with the one-line record: wait() raises it. With SPARK_ON_FAILURE=abort (the
default) the rank group is stopped as from C++.

Timeouts: SPARKNET_ROCE_TIMEOUT_MS, when set, wins; else a `timeout=` given to
init_process_group / new_group becomes the group's communication timeout; torch's default
(30 min, the value init_process_group uses when none is given) counts as none given, and
libspark's default (10 s) applies.
"""
import atexit as _atexit
import datetime as _datetime
import os as _os
import weakref as _weakref

import torch.distributed as _dist

try:
    from libspark import _c10d
except ImportError as e:  # pragma: no cover - depends on the build
    raise ImportError(
        "libspark was built without the torch backend (libspark._c10d): build it against the "
        "torch of this interpreter (pip install --no-build-isolation ./python, or reconfigure "
        "CMake with this python3; the '-- sparkrun: torch backend' line of its output says what "
        "it found)") from e

BACKEND = "spark"

# torch's own default for non-NCCL groups (torch.distributed.constants.default_pg_timeout).
_TORCH_DEFAULT_TIMEOUT = getattr(getattr(_dist, "constants", None), "default_pg_timeout",
                                 _datetime.timedelta(minutes=30))


def _timeout_ms(timeout):
    """The communication timeout a group gets from torch's `timeout`, 0 to keep libspark's."""
    if _os.environ.get("SPARKNET_ROCE_TIMEOUT_MS"):
        return 0
    if timeout is None or timeout == _TORCH_DEFAULT_TIMEOUT:
        return 0
    ms = int(timeout.total_seconds() * 1000)
    if ms <= 0:
        raise ValueError(f"backend spark: timeout {timeout} is not positive")
    return min(ms, 2**32 - 1)


_backends = _weakref.WeakSet()


def _create(dist_opts, backend_opts=None):  # noqa: ARG001 - torch passes both
    backend = _c10d.create_backend(dist_opts.store, dist_opts.group_rank, dist_opts.group_size,
                                   _timeout_ms(dist_opts.timeout))
    _backends.add(backend)
    return backend


@_atexit.register
def _drain_at_exit():
    # Operations still queued at exit run now, while their futures' Python callbacks can still
    # take the GIL (during interpreter finalization they cannot, and the process would abort).
    for backend in list(_backends):
        _c10d.drain(backend)


if BACKEND not in _dist.Backend.backend_list:
    _dist.Backend.register_backend(BACKEND, _create, extended_api=True, devices=["cpu"])


def _backend(group):
    pg = group if group is not None else _dist.distributed_c10d._get_default_group()
    import torch
    return pg._get_backend(torch.device("cpu"))


def failure(group=None):
    """The group's one-line failure record (str), or None while it is healthy."""
    return _c10d.failure(_backend(group))


def check_health(group=None):
    """Raises RuntimeError with the one-line record if the group's communicator has failed."""
    line = failure(group)
    if line is not None:
        raise RuntimeError(line)


def set_timeout_ms(ms, group=None):
    """Deadline of every following wait on a peer in `group`; safe from any thread."""
    _c10d.set_timeout_ms(_backend(group), int(ms))


def timeout_ms(group=None):
    """The group's communication timeout in milliseconds."""
    return _c10d.timeout_ms(_backend(group))
