#pragma once
// The methods tilemix-bench runs, each named once: the name used in configs ("methods") and in
// the tables' "method" column, the kinds of case it runs, whether it follows the case's routing,
// and a line for --list. A config may list only methods that run every one of its cases; when it
// lists none, the methods marked as defaults run. This applies to model cases as well, whose
// reference model (not a method) always runs.
#include <vector>

#include "core/enum_names.hpp"

namespace tilemix {

enum class CaseKind { prefill, decode, model };  // a case's "kind"
inline constexpr EnumName<CaseKind> kCaseKindNames[] = {
    {CaseKind::prefill, "prefill"}, {CaseKind::decode, "decode"}, {CaseKind::model, "model"}};
inline const char* to_string(CaseKind k) { return enum_name(kCaseKindNames, k); }

enum class Method { tilemix, flash_fp16, torch_like, cudnn_fp16, cudnn_fp8, fp16_cache };
inline constexpr EnumName<Method> kMethodNames[] = {
    {Method::tilemix, "tilemix"},       {Method::flash_fp16, "flash_fp16"}, {Method::torch_like, "torch_like"},
    {Method::cudnn_fp16, "cudnn_fp16"}, {Method::cudnn_fp8, "cudnn_fp8"},   {Method::fp16_cache, "fp16_cache"}};
inline const char* to_string(Method m) { return enum_name(kMethodNames, m); }

// True when `m` runs cases of `kind`.
bool runs(Method m, CaseKind kind);
std::vector<CaseKind> case_kinds(Method m);
// The routed kernel follows the case's layout and ratio; a baseline runs without routing.
bool is_routed(Method m);
// One line for tilemix-bench --list.
const char* method_description(Method m);

// The methods that run `kind`, and those of them that run when a config lists no methods.
std::vector<Method> methods_for(CaseKind kind);
std::vector<Method> default_methods(CaseKind kind);

}  // namespace tilemix
