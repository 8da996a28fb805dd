// CUDA's own headers, as NVIDIA's samples use them: cooperative groups for the warp-level
// reduction (tiled_partition, shfl_down, cg::reduce, cg::sync) and CUB's BlockReduce for the
// shared-memory one. cugrade hands NVRTC these headers (and no host headers).
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cub/block/block_reduce.cuh>
namespace cg = cooperative_groups;

extern "C" __global__ void reduce_naive(const float* in, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(out, in[i]);
}

extern "C" __global__ void reduce_shared(const float* in, float* out, int n)
{
    using BlockReduce = cub::BlockReduce<float, 256>;
    __shared__ typename BlockReduce::TempStorage temp;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float total = BlockReduce(temp).Sum(i < n ? in[i] : 0.0f);
    if (threadIdx.x == 0) atomicAdd(out, total);
}

extern "C" __global__ void reduce_shuffle(const float* in, float* out, int n)
{
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
    __shared__ float partial[32];
    int i = blockIdx.x * blockDim.x + block.thread_rank();
    float v = cg::reduce(warp, i < n ? in[i] : 0.0f, cg::plus<float>());
    if (warp.thread_rank() == 0) partial[warp.meta_group_rank()] = v;
    cg::sync(block);
    if (warp.meta_group_rank() == 0) {
        v = warp.thread_rank() < warp.meta_group_size() ? partial[warp.thread_rank()] : 0.0f;
        for (int off = 16; off > 0; off /= 2) v += warp.shfl_down(v, off);
        if (warp.thread_rank() == 0) atomicAdd(out, v);
    }
}
