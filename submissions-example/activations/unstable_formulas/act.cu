// MISTAKES: tanh from exponentials (inf/inf = NaN for |x| > 44), and GELU from the tanh
// approximation (off by up to ~1e-3 from the exact erf form the lab asks for).
__device__ float gelu_tanh_approx(float v)
{
    return 0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));
}
extern "C" __global__ void act_relu(const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
extern "C" __global__ void act_sigmoid(const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 1.0f / (1.0f + expf(-x[i]));
}
extern "C" __global__ void act_tanh(const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float e = expf(2.0f * x[i]);
        y[i] = (e - 1.0f) / (e + 1.0f);
    }
}
extern "C" __global__ void act_gelu(const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = gelu_tanh_approx(x[i]);
}
extern "C" __global__ void act_swish(const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] / (1.0f + expf(-x[i]));
}
extern "C" __global__ void act_mish(const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] * tanhf(log1pf(expf(x[i])));
}
extern "C" __global__ void bias_gelu(const float* x, const float* bias, float* y, int rows, int cols)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < rows * cols) y[i] = gelu_tanh_approx(x[i] + bias[i % cols]);
}
