"""Frontends: programs from other tools into polyc Kernels, and nothing else.

``c`` (``polyc.from_c``) reads ``#pragma scop`` regions of C files; ``torch``
(``polyc.from_torch``) imports a PyTorch module through torch.export. Writing C
back scheduled and the ``torch.compile`` backend are integrations
(:mod:`polyc.integrations`). Each imports torch lazily so that ``import polyc``
stays cheap.
"""
