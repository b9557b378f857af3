"""polyc inside other tools: the ``torch.compile`` backend and the C
source-to-source compiler (``polyc compile``), with their command lines."""
