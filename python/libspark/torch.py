"""The torch.distributed backend "spark"; importing this module registers it.

    import torch.distributed as dist
    import sparkrun.torch
    dist.init_process_group("spark")    # under sparkrun: RANK, WORLD_SIZE, MASTER_* are set
    dist.all_reduce(t)

Every process group (the default one and each dist.new_group) wires up its own libspark
communicator over the c10d Store torch hands in. Operations run when called and return a
completed Work; a failure (timeout, dead peer) surfaces as a RuntimeError (sparkrun.CommFailure
when sparkrun is imported) whose text is the one-line record, and with SPARK_ON_FAILURE=abort
(the default) the rank group is stopped as from C++. torch's own timeout is not used:
SPARKNET_ROCE_TIMEOUT_MS bounds every wait on a peer.
"""
import torch.distributed as _dist

try:
    from sparkrun import _c10d
except ImportError as e:  # pragma: no cover - depends on the build
    raise ImportError(
        "sparkrun was built without the torch backend (sparkrun._c10d): install libtorch-dev and "
        "python3-torch, then reconfigure and rebuild (the '-- sparkrun: torch backend' line of "
        "cmake's output says what it found)") from e

BACKEND = "spark"

if not hasattr(_dist.Backend, BACKEND.upper()):
    _dist.Backend.register_backend(BACKEND, _c10d.create_process_group)


def _group(group):
    if group is None:
        return _dist.distributed_c10d._get_default_group()
    return group


def failure(group=None):
    """The group's one-line failure record (str), or None while it is healthy."""
    return _c10d.failure(_group(group))


def check_health(group=None):
    """Raises RuntimeError with the one-line record if the group's communicator has failed."""
    line = failure(group)
    if line is not None:
        raise RuntimeError(line)


def set_timeout_ms(ms, group=None):
    """Deadline of every following wait on a peer in `group`; safe from any thread."""
    _c10d.set_timeout_ms(_group(group), int(ms))
