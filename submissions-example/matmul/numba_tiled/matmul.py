# Flat arrays (A[row * K + k]) like the CUDA version; the tiled kernel stages 16x16 tiles of
# A and B in shared memory with cuda.syncthreads() around each tile.
from numba import cuda, float32

TILE = 16


@cuda.jit
def matmul_naive(A, B, C, M, N, K):
    row = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    col = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if row < M and col < N:
        acc = float32(0.0)
        for k in range(K):
            acc += A[row * K + k] * B[k * N + col]
        C[row * N + col] = acc


@cuda.jit
def matmul_tiled(A, B, C, M, N, K):
    sA = cuda.shared.array((TILE, TILE), float32)
    sB = cuda.shared.array((TILE, TILE), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    acc = float32(0.0)
    for t in range((K + TILE - 1) // TILE):
        k = t * TILE + tx
        sA[ty, tx] = A[row * K + k] if row < M and k < K else 0.0
        k = t * TILE + ty
        sB[ty, tx] = B[k * N + col] if k < K and col < N else 0.0
        cuda.syncthreads()
        for j in range(TILE):
            acc += sA[ty, j] * sB[j, tx]
        cuda.syncthreads()
    if row < M and col < N:
        C[row * N + col] = acc
