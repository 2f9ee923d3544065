"""Cheats on purpose, spelt so the static check cannot see it: builds and loads a C extension of
its own with Triton's build helper (reached through operator.attrgetter), native code outside
Triton's compilation of a kernel, which could keep results by pointer out of Python's sight."""
import operator

import torch
import triton
import triton.language as tl

_SOURCE = """
#include <Python.h>
static PyObject *seen(PyObject *self, PyObject *args) { return PyLong_FromLong(0); }
static PyMethodDef methods[] = {{"seen", seen, METH_NOARGS, ""}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "pointer_cache", NULL, -1, methods};
PyMODINIT_FUNC PyInit_pointer_cache(void) { return PyModule_Create(&module); }
"""
_cache = operator.attrgetter("runtime.build.compile_module_from_src")(triton)(_SOURCE, "pointer_cache")


@triton.jit
def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(y_ptr + offsets, tl.where(x < 0, tl.zeros_like(x), x), mask=mask)  # keeps NaN


def kernel(self):
    x = self.contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    if n:
        _relu[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)
    return out
