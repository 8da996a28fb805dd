// One thread per pixel on the 2-D grid, computed in float and rounded to nearest.

extern "C" __global__ void rgb_to_gray(const unsigned char* rgb, unsigned char* gray, int w,
                                       int h)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (col < w && row < h) {
        int p = row * w + col;
        float r = rgb[3 * p], g = rgb[3 * p + 1], b = rgb[3 * p + 2];
        gray[p] = (unsigned char)__float2int_rn(0.2989f * r + 0.5870f * g + 0.1140f * b);
    }
}
