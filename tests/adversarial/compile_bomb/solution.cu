// Attack: make the compiler do exponential work. Each level instantiates two distinct
// templates, so nothing is memoised: 2^30 instantiations, far beyond any compile deadline
// or memory limit. The kernel itself would be correct.
template <int N, unsigned M>
struct Bomb {
    static constexpr unsigned v = Bomb<N - 1, 2 * M>::v + Bomb<N - 1, 2 * M + 1>::v;
};
template <unsigned M>
struct Bomb<0, M> {
    static constexpr unsigned v = M;
};

extern "C" __global__ void vector_add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float bias = (float)(Bomb<30, 0>::v & 0u);
    // And an unroll bomb for compilers that cut the template short.
    float acc = 0.0f;
#pragma unroll
    for (int k = 0; k < (1 << 22); ++k) acc += (float)k * 0.0f;
    if (i < n) c[i] = a[i] + b[i] + bias + acc;
}
