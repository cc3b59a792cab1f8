// Compiled instances: INT8 cache, head dimension 128, every row configuration.
#include "kernels/decode/mainloop_mma_sync.cuh"

namespace tilemix::gpu {

template void launch_decode<128, 8, CacheKind::int8>(const DecodeKernelParams&, int64_t, void*, const std::string&);
template void launch_decode<128, 16, CacheKind::int8>(const DecodeKernelParams&, int64_t, void*, const std::string&);
template void launch_decode<128, 32, CacheKind::int8>(const DecodeKernelParams&, int64_t, void*, const std::string&);
template void launch_decode<128, 64, CacheKind::int8>(const DecodeKernelParams&, int64_t, void*, const std::string&);
template void launch_decode<128, 128, CacheKind::int8>(const DecodeKernelParams&, int64_t, void*, const std::string&);

}  // namespace tilemix::gpu
