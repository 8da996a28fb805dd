// Block sum with cooperative groups: cg::sync on the block, a 32-thread tiled partition,
// the tile's shfl_down, and cg::reduce (NVIDIA's transpose and reduction samples use these).
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
namespace cg = cooperative_groups;

extern "C" __global__ void cg_sum(const float* in, float* out, int n)
{
    cg::thread_block block = cg::this_thread_block();
    __shared__ float partial[32];
    int i = blockIdx.x * blockDim.x + block.thread_rank();
    float v = i < n ? in[i] : 0.0f;
    cg::thread_block_tile<32> tile = cg::tiled_partition<32>(block);
    for (int off = tile.size() / 2; off > 0; off /= 2) v += tile.shfl_down(v, off);
    if (tile.thread_rank() == 0) partial[tile.meta_group_rank()] = v;
    cg::sync(block);
    if (tile.meta_group_rank() == 0) {
        float w = tile.thread_rank() < tile.meta_group_size() ? partial[tile.thread_rank()] : 0.0f;
        w = cg::reduce(tile, w, cg::plus<float>());
        if (tile.thread_rank() == 0) atomicAdd(out, w);
    }
}
