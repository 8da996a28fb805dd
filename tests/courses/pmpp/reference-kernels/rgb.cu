// Reference kernel for the pmpp course's rgb lab (rubrics/rgb.yaml): RGB8 to 8-bit gray,
// ported from GPU MODE's pmpp `grayscale` problem (PMPP chapter 3) with its weights,
//
//     gray = round(0.2989 r + 0.5870 g + 0.1140 b),
//
// on interleaved bytes (rgb[3 p], rgb[3 p + 1], rgb[3 p + 2] are pixel p's red, green and
// blue; p = y * w + x). One thread per pixel on a 2-D grid. The rounding is done in integers,
// exactly (half up), like the course's CPU version (cpu/rgb.py), so the two agree to the bit;
// students compute in float, and the rubric's `abs: 1` absorbs a tie rounded the other way
// or a truncation.

extern "C" __global__ void rgb_to_gray(const unsigned char* rgb, unsigned char* gray, int w,
                                       int h)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    int p = y * w + x;
    int r = rgb[3 * p], g = rgb[3 * p + 1], b = rgb[3 * p + 2];
    gray[p] = (unsigned char)((2989 * r + 5870 * g + 1140 * b + 5000) / 10000);
}
