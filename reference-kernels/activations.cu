// Reference kernels for the activations lab: element-wise activation functions and a fused
// bias + GELU.
//
// Unary kernels: y[i] = f(x[i]) for i < n. Default launch: block 256, grid ceil_div(n, 256).
//   act_relu     max(x, 0)
//   act_sigmoid  1 / (1 + e^-x)
//   act_tanh     tanh(x)
//   act_gelu     x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2))   (the exact form, not the tanh fit)
//   act_swish    x * sigmoid(x)                            (SiLU)
//   act_mish     x * tanh(softplus(x)),  softplus(x) = ln(1 + e^x)
// Fused: bias_gelu: y[r][c] = gelu(x[r][c] + bias[c]) on a rows x cols matrix; one pass over
// memory instead of two (a bias kernel then a GELU kernel would write and re-read y).
//
// The lesson is numerical as much as parallel: each formula here is written so that no
// intermediate overflows or cancels for any float input:
//   * sigmoid: e^-x may overflow to +inf for x < -88, and 1/(1+inf) = 0 is the right limit.
//   * tanh: (e^2x - 1)/(e^2x + 1) gives inf/inf = NaN for x > 44; tanhf does not.
//   * gelu: 1 + erf(x/sqrt2) cancels for x < -3; erfc(-x/sqrt2) computes the same value
//     without cancellation.
//   * mish: ln(1 + e^x) loses everything for x < -17 in float (1 + e^x rounds to 1); log1pf
//     keeps it, and for large x softplus(x) = x exactly.

#define SQRT1_2 0.70710678118654752f

__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ __forceinline__ float gelu(float x) { return 0.5f * x * erfcf(-x * SQRT1_2); }
__device__ __forceinline__ float softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

// Element-wise kernels: one thread per element, guarded.
extern "C" __global__ void act_relu(const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

extern "C" __global__ void act_sigmoid(const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = sigmoid(x[i]);
}

extern "C" __global__ void act_tanh(const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = tanhf(x[i]);
}

extern "C" __global__ void act_gelu(const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = gelu(x[i]);
}

extern "C" __global__ void act_swish(const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] * sigmoid(x[i]);
}

extern "C" __global__ void act_mish(const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] * tanhf(softplus(x[i]));
}

// Default launch: block 256, grid ceil_div(rows * cols, 256).
extern "C" __global__ void bias_gelu(const float* x, const float* bias, float* y,
                                     int rows, int cols)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < rows * cols) {
        // bias[c] is read by every row; it stays in L1/L2.
        y[i] = gelu(x[i] + bias[i % cols]);
    }
}
