#pragma once
// Marks the functions that the CPU code and the CUDA kernels share (one definition, so that both
// compute the same values): __host__ __device__ under nvcc, nothing in a plain C++ build.
#if defined(__CUDACC__)
#define TILEMIX_HOST_DEVICE __host__ __device__
#else
#define TILEMIX_HOST_DEVICE
#endif
