#include "workers/plugin_host/shared_library.h"

#include <dlfcn.h>

#include <utility>

#include "core/logging.h"

namespace tessel::workers {
namespace {

std::string LastDlError() {
  const char* text = dlerror();
  return text ? text : "no dlerror text";
}

}  // namespace

Result<SharedLibrary> SharedLibrary::Open(const std::string& path) {
  if (path.find('/') == std::string::npos) {
    return PluginError(StrCat("plugin path '", path, "' must name a file (contain a '/'), not a library name"));
  }
  dlerror();                                                                   // clear any stale error of this thread
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);  // never unmapped: see the header
  if (handle == nullptr) return PluginError(StrCat("cannot load plugin ", path, ": ", LastDlError()));
  return SharedLibrary(handle, path);
}

SharedLibrary::SharedLibrary(SharedLibrary&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)), path_(std::move(other.path_)) {}

SharedLibrary& SharedLibrary::operator=(SharedLibrary&& other) noexcept {
  if (this != &other) {
    Close();
    handle_ = std::exchange(other.handle_, nullptr);
    path_ = std::move(other.path_);
  }
  return *this;
}

SharedLibrary::~SharedLibrary() { Close(); }

void SharedLibrary::Close() {
  if (handle_ != nullptr) dlclose(handle_);
  handle_ = nullptr;
}

Result<void*> SharedLibrary::Symbol(const char* name) const {
  if (handle_ == nullptr) return InternalError(StrCat("symbol lookup on a closed library ", path_));
  dlerror();
  void* address = dlsym(handle_, name);
  if (address == nullptr) {
    return PluginError(StrCat("plugin ", path_, " does not export the symbol '", name, "': ", LastDlError()));
  }
  return address;
}

}  // namespace tessel::workers
