# tanh written from its definition in an ElementwiseKernel: exp(2x) overflows to inf for
# x > 44 and inf / inf is NaN (the scale-100 case).
import cupy as cp

act_relu = cp.ElementwiseKernel("T x", "T y", "y = max(x, (T)0)", "act_relu")
act_sigmoid = cp.ElementwiseKernel("T x", "T y", "y = 1 / (1 + exp(-x))", "act_sigmoid")
act_swish = cp.ElementwiseKernel("T x", "T y", "y = x / (1 + exp(-x))", "act_swish")
act_gelu = cp.ElementwiseKernel("T x", "T y", "y = 0.5f * x * (1 + erf(x * 0.70710678f))", "act_gelu")

act_tanh = cp.ElementwiseKernel(
    "float32 x",
    "float32 y",
    "float e = expf(2.0f * x); y = (e - 1.0f) / (e + 1.0f)",
    "act_tanh",
)
