"""Frontends: programs from other tools into polyc Kernels.

``c`` (``polyc.from_c``) reads ``#pragma scop`` regions of C files; ``c_s2s`` writes
them back scheduled (``polyc compile in.c -o out.c``).
``torch_export`` (``polyc.from_torch``) imports a PyTorch module through torch.export;
``torch_compile`` is the ``torch.compile(backend="polyc")`` backend. Each imports torch
lazily so that ``import polyc`` stays cheap.
"""
