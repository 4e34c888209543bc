"""An all-reduce helper in the shape of vLLM's custom all-reduce, over sparkrun.

An engine's device communicator keeps one instance per tensor-parallel group and asks it first:

    ar = SparkCustomAllreduce()               # or SparkCustomAllreduce(comm=existing)
    out = ar.custom_all_reduce(t) if ar.should_custom_ar(t) else None
    if out is None:
        out = fallback_all_reduce(t)          # e.g. torch.distributed.all_reduce

A serving process whose check_health() raises (libspark.CommFailure) must fail the requests in
flight and restart the whole rank group: fail-stop means no collective of that group will
succeed again. See docs/python.md, "Engine adapter".
"""
import libspark

_SUPPORTED = ("torch.float32", "torch.float64", "torch.float16", "torch.bfloat16",
              "torch.int32", "torch.int64", "torch.uint8")


class SparkCustomAllreduce:
    """All-reduce / all-gather of tensors with fail-stop timeouts. CUDA tensors take libspark's
    device path where sparkrun is built with CUDA (enqueued on torch's current stream, as an
    engine's own all-reduce is); all_gather takes CPU tensors.

    comm: a libspark.Communicator to use (not closed by close()); None: libspark.init() now.
    max_size: largest tensor in bytes that should_custom_ar() accepts.
    """

    def __init__(self, comm=None, max_size=8 * 1024 * 1024):
        self._owned = comm is None
        self._comm = libspark.init() if comm is None else comm
        self._max_size = int(max_size)
        self.disabled = False

    @property
    def rank(self):
        return self._comm.rank

    @property
    def world_size(self):
        return self._comm.size

    @property
    def max_size(self):
        """Bytes: tensors larger than this go to the engine's other path."""
        return self._max_size

    def should_custom_ar(self, inp):
        """True when custom_all_reduce(inp) will do the work: open, a contiguous tensor of a
        supported dtype (CUDA tensors only where sparkrun has the device path), at most
        max_size bytes."""
        if self.disabled or self._comm.closed:
            return False
        cuda = getattr(inp, "is_cuda", None)
        if cuda is None or (cuda and not libspark.built_with_cuda()) or not inp.is_contiguous():
            return False
        if str(inp.dtype) not in _SUPPORTED:
            return False
        return inp.numel() * inp.element_size() <= self._max_size

    def custom_all_reduce(self, inp):
        """The sum over the group in a new tensor, or None when should_custom_ar(inp) is False
        (the caller then uses its fallback). Raises libspark.CommFailure after a failure. A
        CUDA tensor's result is ready in the order of torch's current stream."""
        if not self.should_custom_ar(inp):
            return None
        import torch

        out = torch.empty_like(inp)
        self._comm.allreduce(inp, out)
        return out

    def all_reduce(self, inp, op=libspark.SUM):
        """In place; returns inp."""
        return self._comm.allreduce(inp, None, op)

    def all_gather(self, inp, dim=0):
        """Every rank's inp concatenated along `dim` (vLLM's all_gather)."""
        import torch

        inp = inp.contiguous()
        out = torch.empty((self.world_size,) + tuple(inp.shape), dtype=inp.dtype)
        self._comm.allgather(inp, out)
        if dim < 0:
            dim += inp.dim()
        out = out.movedim(0, dim)
        shape = inp.shape[:dim] + (self.world_size * inp.shape[dim],) + inp.shape[dim + 1:]
        return out.reshape(shape)

    def capture(self):
        """vLLM wraps CUDA-graph capture in this. Nothing to do: the device allreduce is
        capturable as it is (each replay takes its own sequence number); do no host collective
        on this communicator while a capture is open (it would wait for the captured work),
        and synchronise a replay's stream before the next host collective (all_gather)."""
        import contextlib

        return contextlib.nullcontext()

    def check_health(self):
        """Raises libspark.CommFailure (with .record) if the group has failed."""
        self._comm.check_health()

    def failure(self):
        """The libspark.FailureRecord, or None."""
        return self._comm.failure()

    def close(self):
        self.disabled = True
        if self._owned and not self._comm.closed:
            self._comm.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
