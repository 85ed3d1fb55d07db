"""Builds contactnet._C: the C++ ops always, the CUDA ops when torch has CUDA and nvcc is found
(or FORCE_CUDA=1). Build with `pip install --no-build-isolation -e .` against the installed torch."""

import glob
import os
import shutil

import torch
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension, CUDAExtension

ROOT = os.path.dirname(os.path.abspath(__file__))


def cuda_wanted() -> bool:
    if os.environ.get("FORCE_CUDA", "0") == "1":
        return True
    nvcc_found = shutil.which("nvcc") is not None or os.environ.get("CUDA_HOME") is not None
    # The CPU torch wheel has no libtorch_cuda to link against, whatever nvcc is present.
    return torch.version.cuda is not None and nvcc_found


def extension():
    csrc = os.path.join(ROOT, "csrc")
    sources = sorted(glob.glob(os.path.join("csrc", "**", "*.cpp"), recursive=True))
    compile_args = {"cxx": ["-O3", "-fopenmp"]}
    common = dict(include_dirs=[csrc], extra_link_args=["-fopenmp"])
    if cuda_wanted():
        sources += sorted(glob.glob(os.path.join("csrc", "**", "*.cu"), recursive=True))
        # --fmad=false: no a*b+c contraction, as on the CPU (g++ for x86-64 emits no FMA), so the
        # exact predicates cancel the same way on both devices (an FMA turns a*b - a*b into
        # a*b's rounding error: coplanar triangles then test as crossing or apart).
        compile_args["nvcc"] = ["-O3", "--expt-relaxed-constexpr", "-lineinfo", "--fmad=false"]
        return CUDAExtension("contactnet._C", sources, extra_compile_args=compile_args, **common)
    return CppExtension("contactnet._C", sources, extra_compile_args=compile_args, **common)


setup(ext_modules=[extension()], cmdclass={"build_ext": BuildExtension})
