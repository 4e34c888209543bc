"""sparkrun: libspark's collectives for Python, with the fail-stop contract.

    import sparkrun, numpy as np
    comm = sparkrun.init()              # under sparkrun, srun --mpi=pmix, torchrun-style vars
    x = np.ones(1024, np.float32)
    comm.allreduce(x)                    # in place; comm.allreduce(x, out) out of place
    comm.check_health()                  # raises sparkrun.CommFailure(.record) after a failure
    tp = comm.split(comm.rank // 2)      # sub-communicators: split(color, key=None), dup()

The torch.distributed backend "spark" is registered by `import sparkrun.torch`, and by
`import sparkrun` when torch is already imported. See docs/python.md.
"""
import sys as _sys

from sparkrun._core import (
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

# Importing torch costs about a second: register the backend only for jobs that use torch.
if "torch" in _sys.modules:
    try:
        from sparkrun import torch as _torch_backend  # noqa: F401
    except ImportError:  # built without the torch backend: sparkrun.torch says why on import
        pass
