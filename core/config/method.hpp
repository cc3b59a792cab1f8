#pragma once
// The methods tilemix-bench runs, each named once: the name used in configs ("methods") and in
// the tables' "method" column, the kinds of case it runs, whether it follows the case's routing,
// and a line for --list. A config may list only methods that run every one of its cases; when it
// lists none, the methods marked as defaults run. This applies to model cases as well, whose
// reference model (not a method) always runs.
#include <optional>
#include <string>
#include <vector>

namespace tilemix {

enum class CaseKind { prefill, decode, model };

const char* to_string(CaseKind k);  // "prefill", "decode", "model": the cases' "kind"
std::optional<CaseKind> parse_case_kind(const std::string& name);
std::vector<CaseKind> all_case_kinds();

enum class Method { tilemix, flash_fp16, torch_like, cudnn_fp16, cudnn_fp8, fp16_cache };

const char* to_string(Method m);
std::optional<Method> parse_method(const std::string& name);
std::vector<Method> all_methods();

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
