"""porter: port PTX hot loops across NVIDIA GPU generations, verified on measured evidence.

The package keeps its import light: nothing here imports litellm, cupy or git, so that
``porter --help`` starts fast. Heavy dependencies are imported inside the functions that use them.
"""

__version__ = "0.1.0"
