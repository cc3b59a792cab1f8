#include "kernels/baselines/shared_library.hpp"

#include <dlfcn.h>

namespace tilemix::gpu {

SharedLibrary::SharedLibrary(std::initializer_list<const char*> names) {
  std::string first_error;
  for (const char* name : names) {
    handle_ = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (handle_ != nullptr) {
      name_ = name;
      return;
    }
    const char* err = dlerror();
    if (first_error.empty()) first_error = std::string(*names.begin()) + " not found: " + (err ? err : "unknown error");
  }
  error_ = first_error;
}

void* SharedLibrary::find(const char* symbol) {
  if (handle_ == nullptr) return nullptr;
  dlerror();
  void* p = dlsym(handle_, symbol);
  if (p == nullptr && error_.empty()) error_ = name_ + " has no symbol " + symbol;
  return p;
}

}  // namespace tilemix::gpu
