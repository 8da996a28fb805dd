# The activations lab as CuPy ElementwiseKernels, the way the course's CuPy guide writes them:
# `T` placeholders, one expression per element, and a bias row broadcast over a matrix.
import cupy as cp

act_relu = cp.ElementwiseKernel("T x", "T y", "y = x > 0 ? x : (T)0", "act_relu")

act_sigmoid = cp.ElementwiseKernel(
    "float32 x", "float32 y", "y = 1.0f / (1.0f + expf(-x))", "act_sigmoid"
)

act_tanh = cp.ElementwiseKernel("float32 x", "float32 y", "y = tanhf(x)", "act_tanh")

act_gelu = cp.ElementwiseKernel(
    "float32 x",
    "float32 y",
    "y = 0.5f * x * (1.0f + erff(x * 0.70710678f))",
    "act_gelu",
)

act_swish = cp.ElementwiseKernel(
    "float32 x", "float32 y", "y = x / (1.0f + expf(-x))", "act_swish"
)

act_mish = cp.ElementwiseKernel(
    "float32 x",
    "float32 y",
    """
    float sp = x > 20.0f ? x : log1pf(expf(x));
    y = x * tanhf(sp);
    """,
    "act_mish",
)

# bias has `cols` elements: CuPy broadcasts it along each row of the (rows, cols) matrix.
bias_gelu = cp.ElementwiseKernel(
    "float32 x, float32 bias",
    "float32 y",
    "float v = x + bias; y = 0.5f * v * (1.0f + erff(v * 0.70710678f))",
    "bias_gelu",
)
