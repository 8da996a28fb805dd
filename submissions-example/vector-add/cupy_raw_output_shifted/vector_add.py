# An ElementwiseKernel whose output is `raw` and indexed by hand, one element too far: the
# last element is written past the end of c, and c[0] is never written. memcheck names the
# Python line of the operation (vector_add.py:10).
import cupy as cp

vector_add = cp.ElementwiseKernel(
    "float32 a, float32 b",
    "raw float32 c",
    # MISTAKE: c[i + 1] instead of c[i].
    "c[i + 1] = a + b",
    "vector_add",
)
