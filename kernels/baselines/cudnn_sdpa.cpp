// cudnn_fp16 and cudnn_fp8: cuDNN 9's fused scaled-dot-product attention forward, built through
// the backend graph API (descriptors, operation graph, engine heuristics, execution plan, variant
// pack). The graph is the one cuDNN's fused flash-attention engines recognise and cudnn-frontend
// emits for sdpa / sdpa_fp8 (its "composite" form): matmul, scale, optional causal mask, the
// softmax written out as reductions and pointwise ops, matmul; FP8 adds the descale/scale
// multiplies and the amax reductions. docs/baselines.md lists every tensor and operation.
// cuDNN is opened with dlopen; a build without cuDNN's headers reports the baselines unavailable.
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "kernels/baselines/availability.hpp"
#include "tilemix/baselines.hpp"

#if __has_include(<cudnn_graph.h>)
#include <cudnn_graph.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "kernels/baselines/fp8_operands.hpp"
#include "kernels/baselines/shared_library.hpp"
#include "kernels/common/check.cuh"
#include "tilemix/device_buffer.hpp"

namespace tilemix::gpu {
namespace {

struct CudnnApi {
  decltype(&cudnnGetVersion) get_version = nullptr;
  decltype(&cudnnGetErrorString) error_string = nullptr;
  decltype(&cudnnGetLastErrorString) last_error_string = nullptr;
  decltype(&cudnnCreate) create = nullptr;
  decltype(&cudnnDestroy) destroy = nullptr;
  decltype(&cudnnSetStream) set_stream = nullptr;
  decltype(&cudnnBackendCreateDescriptor) create_descriptor = nullptr;
  decltype(&cudnnBackendDestroyDescriptor) destroy_descriptor = nullptr;
  decltype(&cudnnBackendSetAttribute) set_attribute = nullptr;
  decltype(&cudnnBackendGetAttribute) get_attribute = nullptr;
  decltype(&cudnnBackendFinalize) finalize = nullptr;
  decltype(&cudnnBackendExecute) execute = nullptr;
  std::string error;  // empty when cuDNN 9 loaded with every symbol
  size_t version = 0;
};

const CudnnApi& cudnn() {
  static const CudnnApi api = [] {
    static SharedLibrary lib{"libcudnn.so.9", "libcudnn.so", "/usr/local/cuda/lib64/libcudnn.so.9"};
    CudnnApi a;
    lib.resolve("cudnnGetVersion", a.get_version);
    lib.resolve("cudnnGetErrorString", a.error_string);
    lib.resolve("cudnnGetLastErrorString", a.last_error_string);
    lib.resolve("cudnnCreate", a.create);
    lib.resolve("cudnnDestroy", a.destroy);
    lib.resolve("cudnnSetStream", a.set_stream);
    lib.resolve("cudnnBackendCreateDescriptor", a.create_descriptor);
    lib.resolve("cudnnBackendDestroyDescriptor", a.destroy_descriptor);
    lib.resolve("cudnnBackendSetAttribute", a.set_attribute);
    lib.resolve("cudnnBackendGetAttribute", a.get_attribute);
    lib.resolve("cudnnBackendFinalize", a.finalize);
    lib.resolve("cudnnBackendExecute", a.execute);
    if (!lib.loaded()) {
      a.error = lib.error();
      return a;
    }
    a.version = a.get_version();
    if (a.version / 10000 != 9) {
      a.error = lib.name() + " is cuDNN " + std::to_string(a.version) + "; the graph is built for cuDNN 9";
    }
    return a;
  }();
  return api;
}

std::string version_text(size_t v) {
  return std::to_string(v / 10000) + "." + std::to_string(v % 10000 / 100) + "." + std::to_string(v % 100);
}

// Every cuDNN status is checked; the error names the call, cuDNN's own message and the shape.
void check(cudnnStatus_t status, const std::string& call, const std::string& context) {
  if (status == CUDNN_STATUS_SUCCESS) return;
  const CudnnApi& api = cudnn();
  char detail[1024] = {};
  api.last_error_string(detail, sizeof detail);
  throw std::runtime_error(call + " failed: " + api.error_string(status) + (detail[0] ? std::string(": ") + detail : "") +
                           " [" + context + "]");
}

class Descriptor {
 public:
  Descriptor() = default;
  Descriptor(cudnnBackendDescriptorType_t type, const std::string& what, const std::string& context) {
    check(cudnn().create_descriptor(type, &d_), "cudnnBackendCreateDescriptor(" + what + ")", context);
  }
  ~Descriptor() {
    if (d_ != nullptr) cudnn().destroy_descriptor(d_);
  }
  Descriptor(Descriptor&& o) noexcept : d_(std::exchange(o.d_, nullptr)) {}
  Descriptor& operator=(Descriptor&& o) noexcept {
    std::swap(d_, o.d_);
    return *this;
  }
  cudnnBackendDescriptor_t get() const { return d_; }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

class Handle {
 public:
  explicit Handle(const std::string& context) { check(cudnn().create(&h_), "cudnnCreate", context); }
  ~Handle() {
    if (h_ != nullptr) cudnn().destroy(h_);
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  cudnnHandle_t get() const { return h_; }

 private:
  cudnnHandle_t h_ = nullptr;
};

#define TILEMIX_CUDNN_SET(desc, attr, type, count, value, context) \
  check(cudnn().set_attribute((desc), (attr), (type), (count), (value)), "cudnnBackendSetAttribute(" #attr ")", (context))

using Dims = std::array<int64_t, 4>;

// Unique ids of the tensors the variant pack binds; virtual tensors are numbered after them.
enum Uid : int64_t {
  kQ = 1, kK, kV, kO,
  kDescaleQ, kDescaleK, kDescaleV, kDescaleS, kScaleS, kScaleO, kAmaxS, kAmaxO,
  kAttnScale, kNegInf, kSeqLenKv, kSeqLenQ,
  kFirstVirtual = 100
};

// What the graph is built for: an equal-length batch in the packed layout, i.e. BSHD strides.
struct Spec {
  bool fp8 = false;
  bool causal = false;
  bool bottom_right = false;  // causal with Lq < Lk; with Lq == Lk the top-left diagonal is the same
  int64_t b = 0, hq = 0, hk = 0, sq = 0, skv = 0, d = 0;
};

// The operation graph under construction. Owns every descriptor it creates.
class GraphBuilder {
 public:
  explicit GraphBuilder(std::string context) : context_(std::move(context)) {}

  cudnnBackendDescriptor_t tensor(int64_t uid, cudnnDataType_t type, const Dims& dims, const Dims& strides,
                                  bool is_virtual = false, bool by_value = false) {
    Descriptor& t = own(CUDNN_BACKEND_TENSOR_DESCRIPTOR, "TENSOR");
    const int64_t alignment = 16;
    TILEMIX_CUDNN_SET(t.get(), CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type, context_);
    TILEMIX_CUDNN_SET(t.get(), CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims.data(), context_);
    TILEMIX_CUDNN_SET(t.get(), CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides.data(), context_);
    TILEMIX_CUDNN_SET(t.get(), CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, context_);
    TILEMIX_CUDNN_SET(t.get(), CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment, context_);
    if (is_virtual) TILEMIX_CUDNN_SET(t.get(), CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual, context_);
    if (by_value) TILEMIX_CUDNN_SET(t.get(), CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value, context_);
    check(cudnn().finalize(t.get()), "cudnnBackendFinalize(TENSOR uid " + std::to_string(uid) + ")", context_);
    return t.get();
  }

  cudnnBackendDescriptor_t virtual_tensor(cudnnDataType_t type, const Dims& dims, const Dims& strides) {
    return tensor(next_virtual_++, type, dims, strides, true);
  }

  // A scalar the variant pack passes by value from host memory.
  cudnnBackendDescriptor_t scalar(int64_t uid, cudnnDataType_t type) {
    return tensor(uid, type, {1, 1, 1, 1}, {1, 1, 1, 1}, false, true);
  }

  void matmul(cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t c) {
    Descriptor& desc = own(CUDNN_BACKEND_MATMUL_DESCRIPTOR, "MATMUL");
    const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
    TILEMIX_CUDNN_SET(desc.get(), CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute, context_);
    check(cudnn().finalize(desc.get()), "cudnnBackendFinalize(MATMUL)", context_);
    Descriptor& op = own(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, "OPERATION_MATMUL");
    cudnnBackendDescriptor_t d = desc.get();
    TILEMIX_CUDNN_SET(op.get(), CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &a, context_);
    TILEMIX_CUDNN_SET(op.get(), CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b, context_);
    TILEMIX_CUDNN_SET(op.get(), CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c, context_);
    TILEMIX_CUDNN_SET(op.get(), CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &d, context_);
    check(cudnn().finalize(op.get()), "cudnnBackendFinalize(OPERATION_MATMUL)", context_);
    ops_.push_back(op.get());
  }

  // y = mode(x[, b[, t]]); axis only for GEN_INDEX.
  void pointwise(cudnnPointwiseMode_t mode, cudnnDataType_t math, cudnnBackendDescriptor_t x,
                 cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t t, cudnnBackendDescriptor_t y,
                 int64_t axis = -1) {
    Descriptor& desc = own(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, "POINTWISE");
    TILEMIX_CUDNN_SET(desc.get(), CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode, context_);
    TILEMIX_CUDNN_SET(desc.get(), CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &math, context_);
    if (mode == CUDNN_POINTWISE_GEN_INDEX) {
      TILEMIX_CUDNN_SET(desc.get(), CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis, context_);
    }
    check(cudnn().finalize(desc.get()), "cudnnBackendFinalize(POINTWISE mode " + std::to_string(mode) + ")", context_);
    Descriptor& op = own(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, "OPERATION_POINTWISE");
    cudnnBackendDescriptor_t d = desc.get();
    const float alpha = 1.0f;
    TILEMIX_CUDNN_SET(op.get(), CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &d,
                      context_);
    TILEMIX_CUDNN_SET(op.get(), CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x, context_);
    TILEMIX_CUDNN_SET(op.get(), CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y, context_);
    if (b != nullptr) {
      TILEMIX_CUDNN_SET(op.get(), CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b, context_);
    }
    if (t != nullptr) {
      TILEMIX_CUDNN_SET(op.get(), CUDNN_ATTR_OPERATION_POINTWISE_TDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t, context_);
    }
    TILEMIX_CUDNN_SET(op.get(), CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, CUDNN_TYPE_FLOAT, 1, &alpha, context_);
    TILEMIX_CUDNN_SET(op.get(), CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, CUDNN_TYPE_FLOAT, 1, &alpha, context_);
    check(cudnn().finalize(op.get()), "cudnnBackendFinalize(OPERATION_POINTWISE mode " + std::to_string(mode) + ")",
          context_);
    ops_.push_back(op.get());
  }

  void reduction(cudnnReduceTensorOp_t mode, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y) {
    Descriptor& desc = own(CUDNN_BACKEND_REDUCTION_DESCRIPTOR, "REDUCTION");
    const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
    TILEMIX_CUDNN_SET(desc.get(), CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute, context_);
    TILEMIX_CUDNN_SET(desc.get(), CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &mode, context_);
    check(cudnn().finalize(desc.get()), "cudnnBackendFinalize(REDUCTION)", context_);
    Descriptor& op = own(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, "OPERATION_REDUCTION");
    cudnnBackendDescriptor_t d = desc.get();
    TILEMIX_CUDNN_SET(op.get(), CUDNN_ATTR_OPERATION_REDUCTION_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &d, context_);
    TILEMIX_CUDNN_SET(op.get(), CUDNN_ATTR_OPERATION_REDUCTION_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x, context_);
    TILEMIX_CUDNN_SET(op.get(), CUDNN_ATTR_OPERATION_REDUCTION_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y, context_);
    check(cudnn().finalize(op.get()), "cudnnBackendFinalize(OPERATION_REDUCTION)", context_);
    ops_.push_back(op.get());
  }

  // Finalizes the operation graph; the builder's descriptors move to the caller with it.
  cudnnBackendDescriptor_t finish(cudnnHandle_t handle, std::vector<Descriptor>& keep) {
    Descriptor& graph = own(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "OPERATIONGRAPH");
    TILEMIX_CUDNN_SET(graph.get(), CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle, context_);
    TILEMIX_CUDNN_SET(graph.get(), CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                      static_cast<int64_t>(ops_.size()), ops_.data(), context_);
    check(cudnn().finalize(graph.get()), "cudnnBackendFinalize(OPERATIONGRAPH)", context_);
    cudnnBackendDescriptor_t g = graph.get();
    for (Descriptor& d : owned_) keep.push_back(std::move(d));
    owned_.clear();
    return g;
  }

 private:
  Descriptor& own(cudnnBackendDescriptorType_t type, const char* what) {
    owned_.emplace_back(type, what, context_);
    return owned_.back();
  }

  std::string context_;
  std::vector<Descriptor> owned_;
  std::vector<cudnnBackendDescriptor_t> ops_;
  int64_t next_virtual_ = kFirstVirtual;
};

// The SDPA forward graph. Shapes are [batch, heads, rows, columns]; the packed [total, H, d]
// layout is BSHD, so Q/V/O get strides {S*H*d, d, H*d, 1} and K is bound as K^T [b, hk, d, skv].
void build_sdpa(GraphBuilder& g, const Spec& s) {
  const cudnnDataType_t io = s.fp8 ? CUDNN_DATA_FP8_E4M3 : CUDNN_DATA_HALF;
  const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
  const Dims score{s.b, s.hq, s.sq, s.skv}, score_strides{s.hq * s.sq * s.skv, s.sq * s.skv, s.skv, 1};
  const Dims row{s.b, s.hq, s.sq, 1}, row_strides{s.hq * s.sq, s.sq, 1, 1};
  const Dims scalar{1, 1, 1, 1};

  auto q = g.tensor(kQ, io, {s.b, s.hq, s.sq, s.d}, {s.sq * s.hq * s.d, s.d, s.hq * s.d, 1});
  auto kt = g.tensor(kK, io, {s.b, s.hk, s.d, s.skv}, {s.skv * s.hk * s.d, s.d, 1, s.hk * s.d});
  auto v = g.tensor(kV, io, {s.b, s.hk, s.skv, s.d}, {s.skv * s.hk * s.d, s.d, s.hk * s.d, 1});
  auto o = g.tensor(kO, io, {s.b, s.hq, s.sq, s.d}, {s.sq * s.hq * s.d, s.d, s.hq * s.d, 1});
  auto mul = [&](cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t factor, const Dims& dims, const Dims& strides) {
    auto y = g.virtual_tensor(f32, dims, strides);
    g.pointwise(CUDNN_POINTWISE_MUL, f32, x, factor, nullptr, y);
    return y;
  };

  // S = Q K^T * attn_scale (* descale_q * descale_k)
  auto scores = g.virtual_tensor(f32, score, score_strides);
  g.matmul(q, kt, scores);
  scores = mul(scores, g.scalar(kAttnScale, f32), score, score_strides);
  if (s.fp8) {
    scores = mul(scores, g.tensor(kDescaleQ, f32, scalar, scalar), score, score_strides);
    scores = mul(scores, g.tensor(kDescaleK, f32, scalar, scalar), score, score_strides);
  }

  // Causal: keep key j of query i iff i (+ skv - sq, bottom-right) >= j; others become -inf.
  if (s.causal) {
    auto row_index = g.virtual_tensor(CUDNN_DATA_INT32, score, score_strides);
    g.pointwise(CUDNN_POINTWISE_GEN_INDEX, f32, scores, nullptr, nullptr, row_index, 2);
    auto col_index = g.virtual_tensor(CUDNN_DATA_INT32, score, score_strides);
    g.pointwise(CUDNN_POINTWISE_GEN_INDEX, f32, scores, nullptr, nullptr, col_index, 3);
    if (s.bottom_right) {
      auto plus_skv = g.virtual_tensor(CUDNN_DATA_INT32, score, score_strides);
      g.pointwise(CUDNN_POINTWISE_ADD, CUDNN_DATA_INT32, row_index, g.scalar(kSeqLenKv, CUDNN_DATA_INT32), nullptr,
                  plus_skv);
      row_index = g.virtual_tensor(CUDNN_DATA_INT32, score, score_strides);
      g.pointwise(CUDNN_POINTWISE_SUB, CUDNN_DATA_INT32, plus_skv, g.scalar(kSeqLenQ, CUDNN_DATA_INT32), nullptr,
                  row_index);
    }
    auto keep = g.virtual_tensor(CUDNN_DATA_BOOLEAN, score, score_strides);
    g.pointwise(CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_BOOLEAN, row_index, col_index, nullptr, keep);
    auto masked = g.virtual_tensor(f32, score, score_strides);
    g.pointwise(CUDNN_POINTWISE_BINARY_SELECT, f32, scores, g.scalar(kNegInf, f32), keep, masked);
    scores = masked;
  }

  // Softmax as the fused engines expect it: max, subtract, exp, sum, and the statistics
  // (max + log(sum), virtual here), then the division.
  auto row_max = g.virtual_tensor(f32, row, row_strides);
  g.reduction(CUDNN_REDUCE_TENSOR_MAX, scores, row_max);
  auto shifted = g.virtual_tensor(f32, score, score_strides);
  g.pointwise(CUDNN_POINTWISE_SUB, f32, scores, row_max, nullptr, shifted);
  auto exps = g.virtual_tensor(f32, score, score_strides);
  g.pointwise(CUDNN_POINTWISE_EXP, f32, shifted, nullptr, nullptr, exps);
  auto row_sum = g.virtual_tensor(f32, row, row_strides);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, exps, row_sum);
  auto log_sum = g.virtual_tensor(f32, row, row_strides);
  g.pointwise(CUDNN_POINTWISE_LOG, f32, row_sum, nullptr, nullptr, log_sum);
  auto stats = g.virtual_tensor(f32, row, row_strides);
  g.pointwise(CUDNN_POINTWISE_ADD, f32, row_max, log_sum, nullptr, stats);
  auto probs = g.virtual_tensor(s.fp8 ? f32 : CUDNN_DATA_HALF, score, score_strides);
  g.pointwise(CUDNN_POINTWISE_DIV, f32, exps, row_sum, nullptr, probs);

  if (!s.fp8) {
    g.matmul(probs, v, o);
    return;
  }
  // FP8: amax_s, P8 = e4m3(P * scale_s); O = P8 V * descale_s * descale_v, amax_o of that, then
  // O8 = e4m3(O * scale_o).
  g.reduction(CUDNN_REDUCE_TENSOR_AMAX, probs, g.tensor(kAmaxS, f32, scalar, scalar));
  auto probs8 = g.virtual_tensor(CUDNN_DATA_FP8_E4M3, score, score_strides);
  g.pointwise(CUDNN_POINTWISE_MUL, f32, probs, g.tensor(kScaleS, f32, scalar, scalar), nullptr, probs8);
  const Dims out{s.b, s.hq, s.sq, s.d}, out_strides{s.hq * s.sq * s.d, s.sq * s.d, s.d, 1};
  auto acc = g.virtual_tensor(f32, out, out_strides);
  g.matmul(probs8, v, acc);
  acc = mul(acc, g.tensor(kDescaleS, f32, scalar, scalar), out, out_strides);
  acc = mul(acc, g.tensor(kDescaleV, f32, scalar, scalar), out, out_strides);
  g.pointwise(CUDNN_POINTWISE_MUL, f32, acc, g.tensor(kScaleO, f32, scalar, scalar), nullptr, o);
  g.reduction(CUDNN_REDUCE_TENSOR_AMAX, acc, g.tensor(kAmaxO, f32, scalar, scalar));
}

// A finalized execution plan with everything it refers to.
struct Plan {
  explicit Plan(const std::string& context) : handle(context) {}
  Handle handle;                       // destroyed last
  std::vector<Descriptor> graph;       // tensors, operations, operation graph
  Descriptor plan;
  int64_t workspace = 0;
};

std::unique_ptr<Plan> build_plan(const Spec& spec, const std::string& context) {
  auto p = std::make_unique<Plan>(context);
  GraphBuilder builder(context);
  build_sdpa(builder, spec);
  cudnnBackendDescriptor_t graph = builder.finish(p->handle.get(), p->graph);

  std::string tried;
  for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    const std::string mode_name = mode == CUDNN_HEUR_MODE_A ? "A" : "FALLBACK";
    Descriptor heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, "ENGINEHEUR", context);
    TILEMIX_CUDNN_SET(heur.get(), CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph,
                      context);
    TILEMIX_CUDNN_SET(heur.get(), CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode, context);
    if (cudnn().finalize(heur.get()) != CUDNN_STATUS_SUCCESS) {
      tried += " heuristics " + mode_name + ": not finalized;";
      continue;
    }
    int64_t count = 0;
    check(cudnn().get_attribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count,
                                nullptr),
          "cudnnBackendGetAttribute(CUDNN_ATTR_ENGINEHEUR_RESULTS count)", context);
    std::vector<Descriptor> configs;
    std::vector<cudnnBackendDescriptor_t> raw;
    for (int64_t i = 0; i < count; ++i) {
      configs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "ENGINECFG", context);
      raw.push_back(configs.back().get());
    }
    int64_t returned = 0;
    if (count > 0) {
      check(cudnn().get_attribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count,
                                  &returned, raw.data()),
            "cudnnBackendGetAttribute(CUDNN_ATTR_ENGINEHEUR_RESULTS)", context);
    }
    std::string last_error;
    for (int64_t i = 0; i < returned; ++i) {
      Descriptor plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, "EXECUTION_PLAN", context);
      TILEMIX_CUDNN_SET(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &raw[i],
                        context);
      const cudnnStatus_t status = cudnn().finalize(plan.get());
      if (status != CUDNN_STATUS_SUCCESS) {
        char detail[512] = {};
        cudnn().last_error_string(detail, sizeof detail);
        last_error = std::string(cudnn().error_string(status)) + (detail[0] ? std::string(": ") + detail : "");
        continue;
      }
      int64_t n = 0;
      check(cudnn().get_attribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n,
                                  &p->workspace),
            "cudnnBackendGetAttribute(CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE)", context);
      p->plan = std::move(plan);
      return p;
    }
    tried += " heuristics " + mode_name + ": " + std::to_string(returned) + " configs, none finalized" +
             (last_error.empty() ? "" : " (last: " + last_error + ")") + ";";
  }
  throw std::runtime_error("no cuDNN engine supports " + context + ":" + tried);
}

// ---- shapes, availability and the plan hand-over -------------------------------------------

struct Target {
  Baseline baseline = Baseline::cudnn_fp16;
  int device = 0;
  int cc = 0;  // compute capability, 10 * major + minor
  Spec spec;
  std::string context;
};

// Fills `t` for the current device, or says why the baseline cannot run the shape at all.
bool describe_target(Baseline b, const AttentionShape& shape, Target& t, std::string* why) {
  auto no = [&](const std::string& reason) {
    if (why) *why = reason;
    return false;
  };
  const CudnnApi& api = cudnn();
  if (!api.error.empty()) return no(api.error);
  if (b != Baseline::cudnn_fp16 && b != Baseline::cudnn_fp8) return no("not a cuDNN baseline");
  const int batch = shape.batch();
  if (batch <= 0) return no("empty batch");
  for (int i = 1; i < batch; ++i) {
    if (shape.seqlen_q(i) != shape.seqlen_q(0) || shape.seqlen_k(i) != shape.seqlen_k(0)) {
      return no("unavailable for varlen batches: the graph is built for B sequences of equal lengths "
                "(cuDNN's ragged THD offsets are not wired up)");
    }
  }
  const int64_t lq = shape.seqlen_q(0), lk = shape.seqlen_k(0);
  if (lq == 0 || lk == 0) return no("unavailable for zero-length sequences");
  cudaError_t err = cudaGetDevice(&t.device);
  cudaDeviceProp prop{};
  if (err == cudaSuccess) err = cudaGetDeviceProperties(&prop, t.device);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return no(std::string("no usable CUDA device: ") + cudaGetErrorString(err));
  }
  t.cc = prop.major * 10 + prop.minor;
  const bool fp8 = b == Baseline::cudnn_fp8;
  if (!fp8 && t.cc < 80) return no("cuDNN's fused attention needs sm80 or newer; this device is sm" + std::to_string(t.cc));
  if (fp8 && t.cc < 90) return no("cuDNN's FP8 attention needs sm90 or newer; this device is sm" + std::to_string(t.cc));
  if (shape.causal && lq > lk) {
    return no("cuDNN's bottom-right causal mask needs Lq <= Lk (rows without keys are not supported)");
  }
  if (fp8 && shape.causal && lq != lk && t.cc < 100) {
    return no("cuDNN's FP8 attention has no bottom-right causal mask before sm100, so causal Lq != Lk is "
              "unavailable on sm" + std::to_string(t.cc));
  }
  t.baseline = b;
  t.spec.fp8 = fp8;
  t.spec.causal = shape.causal;
  t.spec.bottom_right = shape.causal && lq != lk;
  t.spec.b = batch;
  t.spec.hq = shape.hq;
  t.spec.hk = shape.hk;
  t.spec.sq = lq;
  t.spec.skv = lk;
  t.spec.d = shape.d;
  t.context = std::string(baseline_name(b)) + "(B=" + std::to_string(batch) + " hq=" + std::to_string(shape.hq) +
              " hk=" + std::to_string(shape.hk) + " d=" + std::to_string(shape.d) + " lq=" + std::to_string(lq) +
              " lk=" + std::to_string(lk) + " causal=" + (shape.causal ? "1" : "0") + " device " +
              std::to_string(t.device) + " sm" + std::to_string(t.cc) + ")";
  return true;
}

bool same_target(const Target& a, const Target& b) {
  const Spec &x = a.spec, &y = b.spec;
  return a.baseline == b.baseline && a.device == b.device && x.fp8 == y.fp8 && x.causal == y.causal &&
         x.bottom_right == y.bottom_right && x.b == y.b && x.hq == y.hq && x.hk == y.hk && x.sq == y.sq &&
         x.skv == y.skv && x.d == y.d;
}

// Availability answers per target, and the plan built to answer the latest one of each device,
// which the next CudnnAttention of that target takes instead of planning again (plans can take
// seconds: some engines compile at run time).
struct PlanCache {
  std::mutex mutex;
  std::vector<std::pair<Target, std::string>> answers;  // empty string: available
  std::vector<std::pair<Target, std::unique_ptr<Plan>>> spare;
};

// Never destroyed: plans hold cuDNN handles, which must not be torn down after the CUDA runtime
// at process exit.
PlanCache& plan_cache() {
  static PlanCache* cache = new PlanCache;
  return *cache;
}

}  // namespace

bool cudnn_available(Baseline b, const AttentionShape& shape, std::string* why) {
  Target t;
  if (!describe_target(b, shape, t, why)) return false;
  PlanCache& cache = plan_cache();
  std::lock_guard<std::mutex> lock(cache.mutex);
  for (const auto& [target, answer] : cache.answers) {
    if (same_target(target, t)) {
      if (why) *why = answer;
      return answer.empty();
    }
  }
  std::string answer;
  try {
    std::unique_ptr<Plan> plan = build_plan(t.spec, t.context);
    auto slot = std::find_if(cache.spare.begin(), cache.spare.end(),
                             [&](const auto& s) { return s.first.device == t.device; });
    if (slot == cache.spare.end()) {
      cache.spare.emplace_back(t, std::move(plan));
    } else {
      *slot = {t, std::move(plan)};
    }
  } catch (const std::exception& e) {
    answer = e.what();
  }
  cache.answers.emplace_back(t, answer);
  if (why) *why = answer;
  return answer.empty();
}

std::string cudnn_version_string() {
  const CudnnApi& api = cudnn();
  return api.error.empty() ? version_text(api.version) : "unavailable";
}

struct CudnnAttention::Impl {
  Target target;
  std::unique_ptr<Plan> plan;
  DeviceBuffer workspace;
  // cudnn_fp8: E4M3 copies of the operands, the scalar block, and the inputs they were made from.
  DeviceBuffer q8, k8, v8, o8, scalars;
  const void* prepared[3] = {nullptr, nullptr, nullptr};
  // Values passed by value; their addresses go into the variant pack.
  float attn_scale = 0.0f;
  float neg_inf = 0.0f;
  int32_t seq_len_q = 0, seq_len_kv = 0;
  // The variant pack of the last run, rebuilt when a pointer changes.
  std::vector<int64_t> uids;
  std::vector<void*> bound;
  Descriptor pack;

  int64_t q_elements() const { return target.spec.b * target.spec.sq * target.spec.hq * target.spec.d; }
  int64_t kv_elements() const { return target.spec.b * target.spec.skv * target.spec.hk * target.spec.d; }
  void check_params(const PrefillParams& p) const;
  void execute(const std::vector<std::pair<int64_t, void*>>& tensors, cudaStream_t stream);
  std::vector<std::pair<int64_t, void*>> tensors(const PrefillParams& p);
};

CudnnAttention::CudnnAttention(Baseline b, const AttentionShape& shape) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  std::string why;
  if (!describe_target(b, shape, m.target, &why)) {
    throw std::runtime_error(std::string(baseline_name(b)) + " unavailable: " + why);
  }
  {
    PlanCache& cache = plan_cache();
    std::lock_guard<std::mutex> lock(cache.mutex);
    for (auto& [target, plan] : cache.spare) {
      if (plan && same_target(target, m.target)) m.plan = std::move(plan);
    }
  }
  if (!m.plan) m.plan = build_plan(m.target.spec, m.target.context);

  const std::string& ctx = m.target.context;
  try {
    m.workspace = DeviceBuffer(static_cast<size_t>(m.plan->workspace), "cuDNN workspace " + ctx);
    if (m.target.spec.fp8) {
      m.q8 = DeviceBuffer(static_cast<size_t>(m.q_elements()), "E4M3 Q " + ctx);
      m.k8 = DeviceBuffer(static_cast<size_t>(m.kv_elements()), "E4M3 K " + ctx);
      m.v8 = DeviceBuffer(static_cast<size_t>(m.kv_elements()), "E4M3 V " + ctx);
      m.o8 = DeviceBuffer(static_cast<size_t>(m.q_elements()), "E4M3 O " + ctx);
      m.scalars = DeviceBuffer(kFp8ScalarBytes, "FP8 scales " + ctx);
    }
  } catch (const CudaError& e) {
    if (e.code != cudaErrorMemoryAllocation) throw;
    cudaGetLastError();
    const size_t fp8_bytes = m.target.spec.fp8 ? static_cast<size_t>(2 * (m.q_elements() + m.kv_elements())) : 0;
    throw OutOfMemory(ctx + " workspace and operand copies", static_cast<size_t>(m.plan->workspace) + fp8_bytes);
  }
  m.seq_len_q = static_cast<int32_t>(m.target.spec.sq);
  m.seq_len_kv = static_cast<int32_t>(m.target.spec.skv);
  // Masked scores: -inf from cuDNN 9.10 on; earlier releases expect the lowest finite float.
  m.neg_inf = cudnn().version >= 91000 ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::lowest();
}

CudnnAttention::~CudnnAttention() = default;
CudnnAttention::CudnnAttention(CudnnAttention&&) noexcept = default;
CudnnAttention& CudnnAttention::operator=(CudnnAttention&&) noexcept = default;

Baseline CudnnAttention::baseline() const { return impl_->target.baseline; }

size_t CudnnAttention::workspace_bytes(MemoryCount how) const {
  const Impl& m = *impl_;
  return m.workspace.count(how) + m.q8.count(how) + m.k8.count(how) + m.v8.count(how) + m.o8.count(how) +
         m.scalars.count(how);
}

void CudnnAttention::Impl::check_params(const PrefillParams& p) const {
  const Spec& s = target.spec;
  const bool same = p.hq == s.hq && p.hk == s.hk && p.d == s.d && p.batch == s.b && p.total_q == s.b * s.sq &&
                    p.total_k == s.b * s.skv && p.causal == s.causal;
  if (!same) {
    throw std::invalid_argument(target.context + ": run() with params of another shape (hq=" + std::to_string(p.hq) +
                                " hk=" + std::to_string(p.hk) + " d=" + std::to_string(p.d) +
                                " batch=" + std::to_string(p.batch) + " total_q=" + std::to_string(p.total_q) + ")");
  }
  if (!(std::isfinite(p.softmax_scale) && p.softmax_scale > 0.0f)) {
    throw std::invalid_argument(target.context + ": softmax_scale must be positive and finite");
  }
  if (p.q == nullptr || p.k == nullptr || p.v == nullptr || p.o == nullptr) {
    throw std::invalid_argument(target.context + ": q, k, v and o must be device pointers");
  }
}

std::vector<std::pair<int64_t, void*>> CudnnAttention::Impl::tensors(const PrefillParams& p) {
  attn_scale = p.softmax_scale;
  std::vector<std::pair<int64_t, void*>> t;
  if (target.spec.fp8) {
    void* s = scalars.data();
    t = {{kQ, q8.data()},
         {kK, k8.data()},
         {kV, v8.data()},
         {kO, o8.data()},
         {kDescaleQ, fp8_slot(s, Fp8Slot::descale_q)},
         {kDescaleK, fp8_slot(s, Fp8Slot::descale_k)},
         {kDescaleV, fp8_slot(s, Fp8Slot::descale_v)},
         {kDescaleS, fp8_slot(s, Fp8Slot::descale_s)},
         {kScaleS, fp8_slot(s, Fp8Slot::scale_s)},
         {kScaleO, fp8_slot(s, Fp8Slot::scale_o)},
         {kAmaxS, fp8_slot(s, Fp8Slot::amax_s)},
         {kAmaxO, fp8_slot(s, Fp8Slot::amax_o)}};
  } else {
    t = {{kQ, const_cast<void*>(p.q)}, {kK, const_cast<void*>(p.k)}, {kV, const_cast<void*>(p.v)}, {kO, p.o}};
  }
  t.emplace_back(kAttnScale, &attn_scale);
  if (target.spec.causal) t.emplace_back(kNegInf, &neg_inf);
  if (target.spec.bottom_right) {
    t.emplace_back(kSeqLenKv, &seq_len_kv);
    t.emplace_back(kSeqLenQ, &seq_len_q);
  }
  return t;
}

void CudnnAttention::Impl::execute(const std::vector<std::pair<int64_t, void*>>& t, cudaStream_t stream) {
  const std::string& ctx = target.context;
  std::vector<void*> pointers;
  for (const auto& e : t) pointers.push_back(e.second);
  if (pack.get() == nullptr || pointers != bound) {
    uids.clear();
    for (const auto& e : t) uids.push_back(e.first);
    Descriptor fresh(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, "VARIANT_PACK", ctx);
    void* ws = workspace.data();
    TILEMIX_CUDNN_SET(fresh.get(), CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64,
                      static_cast<int64_t>(uids.size()), uids.data(), ctx);
    TILEMIX_CUDNN_SET(fresh.get(), CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR,
                      static_cast<int64_t>(pointers.size()), pointers.data(), ctx);
    TILEMIX_CUDNN_SET(fresh.get(), CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws, ctx);
    check(cudnn().finalize(fresh.get()), "cudnnBackendFinalize(VARIANT_PACK)", ctx);
    pack = std::move(fresh);
    bound = std::move(pointers);
  }
  check(cudnn().set_stream(plan->handle.get(), stream), "cudnnSetStream", ctx);
  check(cudnn().execute(plan->handle.get(), plan->plan.get(), pack.get()), "cudnnBackendExecute", ctx);
}

void CudnnAttention::prepare(const PrefillParams& p, void* stream) {
  Impl& m = *impl_;
  m.check_params(p);
  if (!m.target.spec.fp8) return;
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  void* sc = m.scalars.data();
  fp8_measure_inputs(sc, p.q, m.q_elements(), p.k, p.v, m.kv_elements(), s);
  fp8_quantize(p.q, m.q_elements(), fp8_slot(sc, Fp8Slot::scale_q), m.q8.as<uint8_t>(), s);
  fp8_quantize(p.k, m.kv_elements(), fp8_slot(sc, Fp8Slot::scale_k), m.k8.as<uint8_t>(), s);
  fp8_quantize(p.v, m.kv_elements(), fp8_slot(sc, Fp8Slot::scale_v), m.v8.as<uint8_t>(), s);
  // One calibration run measures amax_o; O's scale then uses the E4M3 range (delayed scaling).
  m.execute(m.tensors(p), s);
  fp8_calibrate_output(sc, s);
  m.prepared[0] = p.q;
  m.prepared[1] = p.k;
  m.prepared[2] = p.v;
}

void CudnnAttention::run(const PrefillParams& p, void* stream) {
  Impl& m = *impl_;
  m.check_params(p);
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  if (m.target.spec.fp8 && (p.q != m.prepared[0] || p.k != m.prepared[1] || p.v != m.prepared[2])) {
    throw std::invalid_argument(m.target.context + ": run() needs prepare() with the same q, k and v first");
  }
  m.execute(m.tensors(p), s);
  if (m.target.spec.fp8) {
    fp8_dequantize(m.o8.as<uint8_t>(), m.q_elements(), fp8_slot(m.scalars.data(), Fp8Slot::descale_o), p.o, s);
  }
}

}  // namespace tilemix::gpu

#else  // no cuDNN headers at build time

namespace tilemix::gpu {

namespace {
const char kNoHeaders[] = "this build was compiled without cuDNN's headers (cudnn_graph.h)";
}

bool cudnn_available(Baseline, const AttentionShape&, std::string* why) {
  if (why) *why = kNoHeaders;
  return false;
}

std::string cudnn_version_string() { return "unavailable"; }

struct CudnnAttention::Impl {};

CudnnAttention::CudnnAttention(Baseline b, const AttentionShape&) {
  throw std::runtime_error(std::string(baseline_name(b)) + " unavailable: " + kNoHeaders);
}
CudnnAttention::~CudnnAttention() = default;
CudnnAttention::CudnnAttention(CudnnAttention&&) noexcept = default;
CudnnAttention& CudnnAttention::operator=(CudnnAttention&&) noexcept = default;
Baseline CudnnAttention::baseline() const { return Baseline::cudnn_fp16; }
size_t CudnnAttention::workspace_bytes(MemoryCount) const { return 0; }
void CudnnAttention::prepare(const PrefillParams&, void*) { throw std::runtime_error(kNoHeaders); }
void CudnnAttention::run(const PrefillParams&, void*) { throw std::runtime_error(kNoHeaders); }

}  // namespace tilemix::gpu

#endif
