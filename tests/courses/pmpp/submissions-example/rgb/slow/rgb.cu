// One thread per row: the threads of column 0 each walk a whole row. Right answers, but only
// h threads work, and the 32 threads of a warp read 32 different rows (no coalescing).

extern "C" __global__ void rgb_to_gray(const unsigned char* rgb, unsigned char* gray, int w,
                                       int h)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (col != 0 || row >= h) return;
    for (int x = 0; x < w; ++x) {
        int p = row * w + x;
        float r = rgb[3 * p], g = rgb[3 * p + 1], b = rgb[3 * p + 2];
        gray[p] = (unsigned char)(0.2989f * r + 0.5870f * g + 0.1140f * b + 0.5f);
    }
}
