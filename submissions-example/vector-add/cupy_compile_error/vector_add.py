# A typo in an ElementwiseKernel's operation: NVRTC's error names the Python line that holds
# the operation string (vector_add.py:8).
import cupy as cp

vector_add = cp.ElementwiseKernel(
    "float32 a, float32 b",
    "float32 c",
    "c = a + bb",
    "vector_add",
)
