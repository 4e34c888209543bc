"""libspark: sparkrun's collectives library for Python, with the fail-stop contract.

The import name is `libspark`, not `sparkrun`: a PyPI project of that name (a vLLM/SGLang launcher
for DGX Sparks) is often installed beside it. The command-line launcher stays `sparkrun`.

    import libspark, numpy as np
    comm = libspark.init()              # under sparkrun, srun --mpi=pmix, torchrun-style vars
    x = np.ones(1024, np.float32)
    comm.allreduce(x)                    # in place; comm.allreduce(x, out) out of place
    comm.check_health()                  # raises libspark.CommFailure(.record) after a failure
    tp = comm.split(comm.rank // 2)      # sub-communicators: split(color, key=None), dup()

The torch.distributed backend "spark" is registered by `import libspark.torch`, and by
`import libspark` when torch is already imported. See docs/python.md.
"""
import sys as _sys

from libspark._core import (
    AVG,
    MAX,
    MIN,
    PROD,
    SUM,
    UNDEFINED,
    BootstrapError,
    CommFailure,
    Communicator,
    ConfigError,
    Error,
    FailureRecord,
    InvalidUsage,
    ReduceOp,
    __version__,
    built_with_cuda,
    init,
)

__all__ = [
    "init", "Communicator", "FailureRecord", "ReduceOp", "SUM", "PROD", "MIN", "MAX", "AVG",
    "UNDEFINED", "Error", "InvalidUsage", "ConfigError", "BootstrapError", "CommFailure",
    "__version__", "built_with_cuda",
]


def _python_stacks_on_signal():
    """Under sparkrun: faulthandler writes every thread's Python frames to the job dir when
    sparkrun collects stacks (a fail-stop timeout, `sparkrun status --stacks`), beside the
    native ones. The signal is SIGRTMIN + protocol::rank_env::kPyStacksSignalOffset (5), the
    file <SPARK_JOB_DIR>/pystacks.r<SPARK_RANK>, as launcher/src/node/stack_dump.cpp reads it."""
    import faulthandler
    import os
    import signal
    job_dir, rank = os.environ.get("SPARK_JOB_DIR"), os.environ.get("SPARK_RANK")
    if not job_dir or rank is None or not hasattr(signal, "SIGRTMIN"):
        return None
    try:
        f = open(os.path.join(job_dir, f"pystacks.r{rank}"), "w")
        faulthandler.register(signal.SIGRTMIN + 5, file=f, all_threads=True)
    except (OSError, ValueError, RuntimeError):  # not writable, or not the main thread
        return None
    return f  # kept open: faulthandler writes to its descriptor


_python_stacks_file = _python_stacks_on_signal()

# Importing torch costs about a second: register the backend only for jobs that use torch.
if "torch" in _sys.modules:
    try:
        from libspark import torch as _torch_backend  # noqa: F401
    except ImportError:  # built without the torch backend: libspark.torch says why on import
        pass
