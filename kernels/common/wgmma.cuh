#pragma once
// Warpgroup MMA (sm_90a) for the operand layouts the wgmma prefill and decode mainloops use: A and
// B K-major in shared memory with the 128-byte swizzle, or A in registers and B MN-major in shared
// memory. One warpgroup = 4 warps.
//
// K-major, 128-byte swizzle: rows of 128 bytes (64 FP16 or 128 INT8 elements along K), the
// 16-byte chunk c of row r stored at chunk c ^ (r % 8), groups of 8 rows 1024 bytes apart, the
// whole thing 1024-byte aligned (the hardware applies the XOR to address bits 4-6 from bits 7-9).
// A K step of 32 bytes (k16 FP16, k32 INT8) moves the descriptor's start address by 32 bytes.
//
// K-major, 64-byte swizzle (INT8 rows of 64 channels, d = 64): rows of 64 bytes, chunk c of row r
// at chunk c ^ ((r / 2) % 4), groups of 8 rows 512 bytes apart, 512-byte aligned; K steps as above.
//
// MN-major FP16 B, 128-byte swizzle: the same bytes read the other way. Rows are K, 64 N elements
// per 128-byte row, 8 K rows per 1024-byte group, further 64-element N blocks `n_block_bytes`
// apart; a k16 step (two 8-row groups) moves the start address by 2048 bytes. So a 64 x 128 FP16
// tile stored as two K-major 64-channel blocks (row = key) is both the K-major B of Q K^T and the
// MN-major B of P V.
//
// Accumulator fragment of m64nN (per warp w, lane = 4g + t): element 4j + e holds row
// 16w + g + 8 * (e / 2), column 8j + 2t + e % 2.
#include <cstdint>
#include <type_traits>

namespace tilemix::gpu {

// Byte offset of element byte `byte` (along K) of row `row` in a K-major 128-byte-swizzled block.
__device__ __forceinline__ uint32_t sw128_offset(int row, int byte) {
  return row * 128 + ((((byte >> 4) ^ row) & 7) << 4) + (byte & 15);
}

// Byte offset of element byte `byte` of row `row` in a K-major 64-byte-swizzled block.
__device__ __forceinline__ uint32_t sw64_offset(int row, int byte) {
  return row * 64 + ((((byte >> 4) ^ (row >> 1)) & 3) << 4) + (byte & 15);
}

// Descriptor of a K-major 128-byte-swizzled operand starting at shared address `smem_addr`
// (1024-byte aligned, plus a multiple of 32 bytes for later K steps): leading byte offset unused
// (1), stride byte offset 1024 (the next group of 8 rows), layout type 1 = 128-byte swizzle.
__device__ __forceinline__ uint64_t sw128_desc(uint32_t smem_addr) {
  return static_cast<uint64_t>((smem_addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>(1) << 16) |
         (static_cast<uint64_t>(1024 >> 4) << 32) | (static_cast<uint64_t>(1) << 62);
}

// Descriptor of a K-major 64-byte-swizzled operand (512-byte aligned, plus the K step): stride byte
// offset 512, layout type 2 = 64-byte swizzle.
__device__ __forceinline__ uint64_t sw64_desc(uint32_t smem_addr) {
  return static_cast<uint64_t>((smem_addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>(1) << 16) |
         (static_cast<uint64_t>(512 >> 4) << 32) | (static_cast<uint64_t>(2) << 62);
}

// The K-major descriptor of an INT8 operand whose rows are kDim channels (one swizzled row each).
template <int kDim>
__device__ __forceinline__ uint64_t int8_rows_desc(uint32_t smem_addr) {
  static_assert(kDim == 64 || kDim == 128, "INT8 rows of 64 or 128 bytes");
  if constexpr (kDim == 128) {
    return sw128_desc(smem_addr);
  } else {
    return sw64_desc(smem_addr);
  }
}

// Byte offset of byte `byte` of row `row` in the same layout (int8_rows_desc's operand).
template <int kDim>
__device__ __forceinline__ uint32_t int8_rows_offset(int row, int byte) {
  if constexpr (kDim == 128) {
    return sw128_offset(row, byte);
  } else {
    static_assert(kDim == 64, "INT8 rows of 64 or 128 bytes");
    return sw64_offset(row, byte);
  }
}

// Descriptor of an MN-major 128-byte-swizzled FP16 operand: leading byte offset = the stride of
// the 64-element N blocks, stride byte offset 1024 (the next 8 K rows).
__device__ __forceinline__ uint64_t sw128_desc_mn(uint32_t smem_addr, uint32_t n_block_bytes) {
  return static_cast<uint64_t>((smem_addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>(n_block_bytes >> 4) << 16) |
         (static_cast<uint64_t>(1024 >> 4) << 32) | (static_cast<uint64_t>(1) << 62);
}

// The descriptor of the same layout `bytes` (a multiple of 16) further on: only the start address
// field moves, and inside the 228 KB of shared memory it does not carry out of its 14 bits. One
// 64-bit add per MMA instead of rebuilding the descriptor.
__device__ __forceinline__ uint64_t desc_advance(uint64_t desc, uint32_t bytes) { return desc + (bytes >> 4); }

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_wait_all() { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }
// Waits until at most kPending committed groups are still running (groups complete in order).
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}
// Pins accumulator registers in program order around wgmma_wait_all: the wait has no register
// operands, so without this the compiler may move reads of the accumulators above it (or writes
// below the MMA that reads them).
template <class T, int N>
__device__ __forceinline__ void wgmma_fence_operands(T (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) {
    if constexpr (sizeof(T) == 4 && std::is_floating_point_v<T>) {
      asm volatile("" : "+f"(r[i])::"memory");
    } else {
      asm volatile("" : "+r"(r[i])::"memory");
    }
  }
}

// Shared-memory writes of this thread (st.shared, cp.async) become visible to wgmma operand reads.
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// The 32 accumulator operands of an m64n64 wgmma, each with constraint C.
#define TILEMIX_WGMMA_ACC32(C, d)                                                                               \
  C(d[0]), C(d[1]), C(d[2]), C(d[3]), C(d[4]), C(d[5]), C(d[6]), C(d[7]), C(d[8]), C(d[9]), C(d[10]), C(d[11]), \
      C(d[12]), C(d[13]), C(d[14]), C(d[15]), C(d[16]), C(d[17]), C(d[18]), C(d[19]), C(d[20]), C(d[21]),      \
      C(d[22]), C(d[23]), C(d[24]), C(d[25]), C(d[26]), C(d[27]), C(d[28]), C(d[29]), C(d[30]), C(d[31])

// D(64x64, s32) = A(64x32, s8) B(32x64, s8) (+ D when `accumulate`), both from shared memory. T is
// int, or uint32_t for accumulators that an FP16 product shares on another path.
template <class T>
__device__ __forceinline__ void wgmma_m64n64k32_s8(T (&d)[32], uint64_t desc_a, uint64_t desc_b, int accumulate) {
  static_assert(sizeof(T) == 4 && !std::is_floating_point_v<T>, "32-bit integer accumulators");
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k32.s32.s8.s8 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p;\n}\n"
      : TILEMIX_WGMMA_ACC32("+r", d)
      : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}

// D(64x64, f32) = A(64x32, e4m3, registers: the mma.m16n8k32 A fragment of the warp's 16 rows)
// B(32x64, e4m3, shared memory, K-major: 8-bit operands have no MN-major form) (+ D when
// `accumulate`). What the accumulator keeps of the sum: tests/kernels/test_fp8_mma_gpu.cpp.
__device__ __forceinline__ void wgmma_m64n64k32_e4m3_rs(float (&d)[32], const uint32_t (&a)[4], uint64_t desc_b,
                                                        int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "{%32, %33, %34, %35}, %36, p, 1, 1;\n}\n"
      : TILEMIX_WGMMA_ACC32("+f", d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate));
}

// D(64x64, f32) = A(64x16, f16) B(16x64, f16) (+ D when `accumulate`), both from shared memory.
__device__ __forceinline__ void wgmma_m64n64k16_f16(float (&d)[32], uint64_t desc_a, uint64_t desc_b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
      : TILEMIX_WGMMA_ACC32("+f", d)
      : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}
// The same with the f32 accumulators held as their bits: a kernel whose tile takes either this or
// the s8 product into one register set (no move between float and integer registers while the
// product is in flight, which would make ptxas serialize the pipeline).
__device__ __forceinline__ void wgmma_m64n64k16_f16(uint32_t (&d)[32], uint64_t desc_a, uint64_t desc_b,
                                                    int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
      : TILEMIX_WGMMA_ACC32("+r", d)
      : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}

#define TILEMIX_WGMMA_REGS64                                                                     \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                      \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "             \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "              \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"

// D(64x128, s32) = A(64x32, s8) B(32x128, s8) (+ D when `accumulate`), both from shared memory,
// into 32-bit integer registers that an FP16 product shares on another path: columns 0-63 in lo,
// 64-127 in hi (the m64n64 fragments of each half).
__device__ __forceinline__ void wgmma_m64n128k32_s8(uint32_t (&lo)[32], uint32_t (&hi)[32], uint64_t desc_a,
                                                    uint64_t desc_b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8 " TILEMIX_WGMMA_REGS64 ", %64, %65, p;\n}\n"
      : TILEMIX_WGMMA_ACC32("+r", lo), TILEMIX_WGMMA_ACC32("+r", hi)
      : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}

// D(64x128, f32, held as its bits) = A(64x16, f16) B(16x128, f16) (+ D when `accumulate`), both
// from shared memory; halves as wgmma_m64n128k32_s8.
__device__ __forceinline__ void wgmma_m64n128k16_f16(uint32_t (&lo)[32], uint32_t (&hi)[32], uint64_t desc_a,
                                                     uint64_t desc_b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " TILEMIX_WGMMA_REGS64 ", %64, %65, p, 1, 1, 0, 0;\n}\n"
      : TILEMIX_WGMMA_ACC32("+r", lo), TILEMIX_WGMMA_ACC32("+r", hi)
      : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}

// D(64x64, s32) = A(64x32, s8, registers: the mma.m16n8k32 A fragment of the warp's 16 rows)
// B(32x64, s8, shared memory, K-major) (+ D when `accumulate`).
__device__ __forceinline__ void wgmma_m64n64k32_s8_rs(int (&d)[32], const uint32_t (&a)[4], uint64_t desc_b,
                                                      int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k32.s32.s8.s8 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "{%32, %33, %34, %35}, %36, p;\n}\n"
      : TILEMIX_WGMMA_ACC32("+r", d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate));
}

// D(64x64, f32) = A(64x16, f16, registers: the mma.m16n8k16 A fragment of the warp's 16 rows)
// B(16x64, f16, shared memory, K-major) (+ D when `accumulate`).
__device__ __forceinline__ void wgmma_m64n64k16_f16_rs(float (&d)[32], const uint32_t (&a)[4], uint64_t desc_b,
                                                       int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "{%32, %33, %34, %35}, %36, p, 1, 1, 0;\n}\n"
      : TILEMIX_WGMMA_ACC32("+f", d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate));
}

// D(64x128, f32) += A(64x16, f16, registers: the mma.m16n8k16 A fragment of the warp's 16 rows)
// B(16x128, f16, shared memory, MN-major: sw128_desc_mn).
__device__ __forceinline__ void wgmma_m64n128k16_f16_rs(float (&d)[64], const uint32_t (&a)[4], uint64_t desc_b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "{%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));
}

// D(64x64, f32) += A(64x16, f16, registers) B(16x64, f16, shared memory, MN-major: sw128_desc_mn).
__device__ __forceinline__ void wgmma_m64n64k16_f16_rs_mn(float (&d)[32], const uint32_t (&a)[4], uint64_t desc_b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "{%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
      : TILEMIX_WGMMA_ACC32("+f", d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));
}

// D(64 x kDim, f16 accumulators as f16x2) += A(64x16, f16, registers) B(16 x kDim, f16, shared
// memory, MN-major): the fp16-accumulation P V.
template <int kDim, int N>
__device__ __forceinline__ void wgmma_f16acc_rs_mn(uint32_t (&d)[N], const uint32_t (&a)[4], uint64_t desc_b) {
  if constexpr (kDim == 128) {
    static_assert(N == 32, "m64n128 f16 accumulators");
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f16.f16.f16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
        "{%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
        : TILEMIX_WGMMA_ACC32("+r", d)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));
  } else {
    static_assert(kDim == 64 && N == 16, "m64n64 f16 accumulators");
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f16.f16.f16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, "
        "{%16, %17, %18, %19}, %20, p, 1, 1, 1;\n}\n"
        : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]),
          "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));
  }
}

// The MMA sequences the attention kernels issue per 64-key tile (fenced, issued and committed;
// the caller waits with wgmma_wait_all when it needs the result), over kDim = 64 or 128 channels.
// S(64 x 64, s32) = Q8 K8^T: kDim / 32 k32 steps inside one swizzled INT8 row (int8_rows_desc).
template <int kDim, class T>
__device__ __forceinline__ void wgmma_scores_s8(T (&s)[32], uint64_t q8_desc, uint64_t k8_desc) {
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kDim / 32; ++kk) {
    wgmma_m64n64k32_s8(s, desc_advance(q8_desc, 32 * kk), desc_advance(k8_desc, 32 * kk), kk);
  }
  wgmma_commit();
}
// S(64 x 64, f32) = Q K^T: kDim / 16 k16 steps, 64-channel blocks per operand (`q_block_bytes` /
// `k_block_bytes` apart).
template <int kDim, class T>
__device__ __forceinline__ void wgmma_scores_f16(T (&s)[32], uint64_t q_desc, uint32_t q_block_bytes,
                                                 uint64_t k_desc, uint32_t k_block_bytes) {
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kDim / 16; ++kk) {
    const uint32_t in_block = 32 * (kk % 4);
    wgmma_m64n64k16_f16(s, desc_advance(q_desc, (kk / 4) * q_block_bytes + in_block),
                        desc_advance(k_desc, (kk / 4) * k_block_bytes + in_block), kk);
  }
  wgmma_commit();
}
// The same over 128 keys (S 64 x 128 as two m64n64 halves): K or K8 as 128-row K-major blocks.
template <int kDim>
__device__ __forceinline__ void wgmma_scores_s8_n128(uint32_t (&lo)[32], uint32_t (&hi)[32], uint64_t q8_desc,
                                                     uint64_t k8_desc) {
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kDim / 32; ++kk) {
    wgmma_m64n128k32_s8(lo, hi, desc_advance(q8_desc, 32 * kk), desc_advance(k8_desc, 32 * kk), kk);
  }
  wgmma_commit();
}
template <int kDim>
__device__ __forceinline__ void wgmma_scores_f16_n128(uint32_t (&lo)[32], uint32_t (&hi)[32], uint64_t q_desc,
                                                      uint32_t q_block_bytes, uint64_t k_desc,
                                                      uint32_t k_block_bytes) {
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kDim / 16; ++kk) {
    const uint32_t in_block = 32 * (kk % 4);
    wgmma_m64n128k16_f16(lo, hi, desc_advance(q_desc, (kk / 4) * q_block_bytes + in_block),
                         desc_advance(k_desc, (kk / 4) * k_block_bytes + in_block), kk);
  }
  wgmma_commit();
}
// S(64 x 64, s32) = Q8 K8^T over 128 INT8 channels with Q8 in registers (q8[kk]: the A fragment of
// channels 32 kk .. 32 kk + 31).
__device__ __forceinline__ void wgmma_scores_s8_d128_rs(int (&s)[32], const uint32_t (&q8)[4][4], uint64_t k8_desc) {
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) wgmma_m64n64k32_s8_rs(s, q8[kk], desc_advance(k8_desc, 32 * kk), kk);
  wgmma_commit();
}
// S(64 x 64, f32) = Q K^T over 128 FP16 channels with Q in registers (q[kk]: the A fragment of
// channels 16 kk .. 16 kk + 15) and K two K-major 64-channel blocks `k_block_bytes` apart.
__device__ __forceinline__ void wgmma_scores_f16_d128_rs(float (&s)[32], const uint32_t (&q)[8][4], uint64_t k_desc,
                                                         uint32_t k_block_bytes) {
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < 8; ++kk) {
    wgmma_m64n64k16_f16_rs(s, q[kk], desc_advance(k_desc, (kk / 4) * k_block_bytes + 32 * (kk % 4)), kk);
  }
  wgmma_commit();
}
// O(64 x 128, f32) += P V over 64 keys: 4 k16 steps, P as the A fragments a[kk] (keys 16 kk ..
// 16 kk + 15), V MN-major (`v_desc` from sw128_desc_mn).
__device__ __forceinline__ void wgmma_pv_k64(float (&o)[64], const uint32_t (&a)[4][4], uint64_t v_desc) {
  wgmma_fence_operands(o);
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) wgmma_m64n128k16_f16_rs(o, a[kk], desc_advance(v_desc, 2048 * kk));
  wgmma_commit();
}

// O(64 x kDim, f32) += P V over the 64 keys of one half of a 128-key V stage: 4 k16 steps, P as
// the A fragments a[kk], V MN-major (`v_desc` from sw128_desc_mn at the half's first row). Fenced
// and issued, not committed: pv routed commits it with the step's FP8 sums.
template <int kDim>
__device__ __forceinline__ void wgmma_pv_half(float (&o)[kDim / 2], const uint32_t (&a)[4][4], uint64_t v_desc) {
  wgmma_fence_operands(o);
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    if constexpr (kDim == 128) {
      wgmma_m64n128k16_f16_rs(o, a[kk], desc_advance(v_desc, 2048 * kk));
    } else {
      wgmma_m64n64k16_f16_rs_mn(o, a[kk], desc_advance(v_desc, 2048 * kk));
    }
  }
}

// O(64 x kDim) += P V over 128 keys: 8 k16 steps (V MN-major, 128 key rows per block), O in fp32
// (kDim / 2 floats per thread) or, accumulated in fp16, as f16x2 pairs (kDim / 4 registers: the
// pairs of the fp32 layout, so the fragment is the same).
template <int kDim, class T, int N>
__device__ __forceinline__ void wgmma_pv_k128(T (&o)[N], const uint32_t (&a)[8][4], uint64_t v_desc) {
  constexpr bool kHalf = std::is_same_v<T, uint32_t>;
  static_assert(N == (kHalf ? kDim / 4 : kDim / 2), "accumulator registers of an m64 x kDim tile");
  wgmma_fence_operands(o);
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < 8; ++kk) {
    const uint64_t b = desc_advance(v_desc, 2048 * kk);
    if constexpr (kHalf) {
      wgmma_f16acc_rs_mn<kDim>(o, a[kk], b);
    } else if constexpr (kDim == 128) {
      wgmma_m64n128k16_f16_rs(o, a[kk], b);
    } else {
      wgmma_m64n64k16_f16_rs_mn(o, a[kk], b);
    }
  }
  wgmma_commit();
}

}  // namespace tilemix::gpu
