#pragma once
// A vendor library opened at run time (dlopen), so that the binary starts and runs the other
// methods on machines without it, and its symbols resolved into a function table.
#include <initializer_list>
#include <string>

namespace tilemix::gpu {

class SharedLibrary {
 public:
  // Opens the first of `names` that loads (each tried as given: bare sonames go through the
  // loader's search path). On failure error() reads "<first name> not found: <dlerror>".
  SharedLibrary(std::initializer_list<const char*> names);
  SharedLibrary(const SharedLibrary&) = delete;
  SharedLibrary& operator=(const SharedLibrary&) = delete;

  bool loaded() const { return handle_ != nullptr && error_.empty(); }
  const std::string& error() const { return error_; }
  const std::string& name() const { return name_; }

  // Sets `fn` to the symbol; a missing one sets error() (and the library counts as not loaded).
  template <class Fn>
  void resolve(const char* symbol, Fn& fn) {
    fn = reinterpret_cast<Fn>(find(symbol));
  }

 private:
  void* find(const char* symbol);
  void* handle_ = nullptr;  // never closed: the tables live as long as the process
  std::string name_;
  std::string error_;
};

}  // namespace tilemix::gpu
