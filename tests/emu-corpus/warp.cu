// Warp-level primitives: shuffles with widths, votes, ballots and active masks.
extern "C" __global__ void warp_ops(const int* in, int* out) {
    int t = threadIdx.x + blockIdx.x * blockDim.x;
    int lane = threadIdx.x % 32;
    int v = in[t];
    int* o = out + t * 10;
    o[0] = __shfl_sync(0xffffffff, v, 3);
    o[1] = __shfl_up_sync(0xffffffff, v, 2, 8);
    o[2] = __shfl_down_sync(0xffffffff, v, 5, 16);
    o[3] = __shfl_xor_sync(0xffffffff, v, 6);
    o[4] = __shfl_sync(0xffffffff, v, lane + 1, 4);
    o[5] = (int)__ballot_sync(0xffffffff, v > 0);
    o[6] = __all_sync(0xffffffff, v > -1000) + 2 * __any_sync(0xffffffff, v > 900);
    if (lane % 3 == 0) {
        o[7] = (int)__activemask();
        o[8] = (int)__ballot_sync(__activemask(), v & 1);
    } else {
        o[7] = -1;
        o[8] = -1;
    }
    o[9] = __popc(__ballot_sync(0xffffffff, lane < 7)) + __clz(lane + 1);
}

