# The reduction lab with CuPy's ReductionKernel: map, reduce, post-map and identity, one
# definition per milestone (CuPy writes the tree).
import cupy as cp

reduce_naive = cp.ReductionKernel(
    "T x",        # in_params
    "T y",        # out_params
    "x",          # map_expr
    "a + b",      # reduce_expr
    "y = a",      # post_map_expr
    "0",          # identity
    "reduce_naive",
)

reduce_shared = cp.ReductionKernel("T x", "T y", "x", "a + b", "y = a", "0", "reduce_shared")

reduce_shuffle = cp.ReductionKernel(
    "float32 x", "float32 y", "x", "a + b", "y = a", "0", "reduce_shuffle",
    reduce_type="float",
)
