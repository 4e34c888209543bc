"""Prints where the torch of this interpreter keeps what a C++ extension builds against, one
key=value per line (lists comma-separated), for python/CMakeLists.txt and pyproject builds.
Exits non-zero with Python's error when torch does not import."""
import re

import torch
import torch.utils.cpp_extension as cpp_extension

release = re.match(r"\d+\.\d+\.\d+", torch.__version__)
fields = {
    "version": torch.__version__,
    "release": release.group(0) if release else torch.__version__,
    "include": ",".join(cpp_extension.include_paths()),
    "libdir": ",".join(cpp_extension.library_paths()),
    "cxx11_abi": int(bool(torch._C._GLIBCXX_USE_CXX11_ABI)),
    "pybind11_compiler_type": getattr(torch._C, "_PYBIND11_COMPILER_TYPE", "") or "",
    "pybind11_stdlib": getattr(torch._C, "_PYBIND11_STDLIB", "") or "",
    "pybind11_build_abi": getattr(torch._C, "_PYBIND11_BUILD_ABI", "") or "",
}
for key, value in fields.items():
    print(f"{key}={value}")
