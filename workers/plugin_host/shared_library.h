// SharedLibrary: RAII over a dlopen handle. The library is opened with RTLD_NOW | RTLD_LOCAL, so every
// undefined symbol is resolved at load time and nothing it defines leaks into the global namespace, and
// with RTLD_NODELETE: once loaded, a plugin stays mapped until the process exits. A CUDA plugin's kernels
// are registered with the CUDA runtime, and its cuBLAS handles bound to streams, for the life of the
// process; an embedded run loads the plugins for the planner's calibration and again for its worker, and
// unmapping them in between, under a live CUDA context, is what the first GPU session's crash in
// EncoderFwdKernel's launch pointed at (issue 17). Loading the same file again returns the same mapping,
// its static state kept. Ownership: the object owns the handle and dlcloses it when destroyed; pointers
// obtained from Symbol() must not be used after that. Thread safety: Open and Symbol may be called from
// any thread.
// Failure: PluginError naming the path, with dlerror()'s text.
#pragma once

#include <string>

#include "core/status.h"

namespace tessel::workers {

class SharedLibrary {
 public:
  // `path` must contain a '/', so that dlopen never searches the library path for it.
  static Result<SharedLibrary> Open(const std::string& path);

  SharedLibrary(SharedLibrary&& other) noexcept;
  SharedLibrary& operator=(SharedLibrary&& other) noexcept;
  SharedLibrary(const SharedLibrary&) = delete;
  SharedLibrary& operator=(const SharedLibrary&) = delete;
  ~SharedLibrary();

  // The address of a defined symbol. Fails when the library does not define it.
  Result<void*> Symbol(const char* name) const;
  const std::string& path() const { return path_; }

 private:
  SharedLibrary(void* handle, std::string path) : handle_(handle), path_(std::move(path)) {}
  void Close();

  void* handle_ = nullptr;
  std::string path_;
};

}  // namespace tessel::workers
