# MISTAKE: B is read as if it were stored transposed (B[col, k] instead of B[k, col]).
from numba import cuda, float32


@cuda.jit
def matmul_naive(A, B, C, M, N, K):
    col, row = cuda.grid(2)
    if row < M and col < N:
        acc = float32(0.0)
        for k in range(K):
            acc += A[row * K + k] * B[col * K + k]
        C[row * N + col] = acc
