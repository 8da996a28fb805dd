#define T 32
extern "C" __global__ void transpose_naive(const float* in, float* out, int rows, int cols) {
    int c = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < rows && c < cols) out[c * rows + r] = in[r * cols + c];
}
extern "C" __global__ void transpose_tiled(const float* in, float* out, int rows, int cols) {
    __shared__ float tile[T][T + 1];
    int c = blockIdx.x * T + threadIdx.x, r = blockIdx.y * T + threadIdx.y;
    for (int j = 0; j < T; j += blockDim.y)
        if (r + j < rows && c < cols) tile[threadIdx.y + j][threadIdx.x] = in[(r + j) * cols + c];
    __syncthreads();
    c = blockIdx.y * T + threadIdx.x; r = blockIdx.x * T + threadIdx.y;
    for (int j = 0; j < T; j += blockDim.y)
        if (r + j < cols && c < rows) out[(r + j) * rows + c] = tile[threadIdx.x][threadIdx.y + j];
}
