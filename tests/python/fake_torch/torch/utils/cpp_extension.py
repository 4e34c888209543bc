"""The real torch's folders (FAKE_TORCH_INCLUDE, FAKE_TORCH_LIBDIR) under a fake version."""
import os


def include_paths():
    return [os.environ["FAKE_TORCH_INCLUDE"]]


def library_paths():
    return [os.environ["FAKE_TORCH_LIBDIR"]]
