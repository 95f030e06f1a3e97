"""soak: stability soak tests for AI training clusters (Ascend NPU, NVIDIA GPU, CPU)."""

__version__ = "0.1.0"
