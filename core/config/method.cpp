#include "core/config/method.hpp"

#include <stdexcept>

namespace tilemix {
namespace {

constexpr unsigned bit(CaseKind k) { return 1u << static_cast<unsigned>(k); }
constexpr unsigned kPrefill = bit(CaseKind::prefill), kDecode = bit(CaseKind::decode), kModel = bit(CaseKind::model);

enum class Role { routed, baseline };
enum class Selection { by_default, when_listed };

struct MethodInfo {
  Method method;
  unsigned kinds;  // bits of the case kinds it runs
  Role role;
  Selection selection;
  const char* description;
};

constexpr MethodInfo kMethods[] = {
    {Method::tilemix, kPrefill | kDecode | kModel, Role::routed, Selection::by_default,
     "FP16/INT8 tile-routed attention, each tile group on the path the case's layout gives it (decode: the INT8 KV "
     "cache)"},
    {Method::flash_fp16, kPrefill | kModel, Role::baseline, Selection::by_default,
     "FP16 flash attention, every tile FP16: the base of prefill speedups and deviations"},
    {Method::torch_like, kPrefill, Role::baseline, Selection::when_listed,
     "unfused cuBLAS attention: S = QK^T GEMM, softmax, O = PV GEMM (out of memory when S does not fit)"},
    {Method::cudnn_fp16, kPrefill, Role::baseline, Selection::when_listed,
     "cuDNN's fused SDPA forward, FP16 Q/K/V/O"},
    {Method::cudnn_fp8, kPrefill, Role::baseline, Selection::when_listed,
     "cuDNN's fused SDPA forward, E4M3 Q/K/V/P/O with per-tensor scales"},
    {Method::fp16_cache, kDecode, Role::baseline, Selection::by_default,
     "decode over the FP16 KV cache with the same kernel shape: the base of decode speedups"},
};

const MethodInfo& info(Method m) {
  for (const auto& i : kMethods) {
    if (i.method == m) return i;
  }
  throw std::logic_error("unknown Method");
}

std::vector<Method> methods_where(bool (*keep)(const MethodInfo&, CaseKind), CaseKind kind) {
  std::vector<Method> v;
  for (const auto& i : kMethods) {
    if (keep(i, kind)) v.push_back(i.method);
  }
  return v;
}

}  // namespace

bool runs(Method m, CaseKind kind) { return (info(m).kinds & bit(kind)) != 0; }

std::vector<CaseKind> case_kinds(Method m) {
  std::vector<CaseKind> v;
  for (CaseKind k : enum_values(kCaseKindNames)) {
    if (runs(m, k)) v.push_back(k);
  }
  return v;
}

bool is_routed(Method m) { return info(m).role == Role::routed; }

const char* method_description(Method m) { return info(m).description; }

std::vector<Method> methods_for(CaseKind kind) {
  return methods_where([](const MethodInfo& i, CaseKind k) { return (i.kinds & bit(k)) != 0; }, kind);
}

std::vector<Method> default_methods(CaseKind kind) {
  return methods_where(
      [](const MethodInfo& i, CaseKind k) { return (i.kinds & bit(k)) != 0 && i.selection == Selection::by_default; },
      kind);
}

}  // namespace tilemix
