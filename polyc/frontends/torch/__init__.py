"""The PyTorch frontend: an ``nn.Module`` or an ``ExportedProgram`` as one Kernel
(``polyc.from_torch``), through ``torch.export``, the ATen lowerings of
:mod:`polyc.frontends.torch.ops` and batch-norm folding. torch is imported on first
use, not here."""
