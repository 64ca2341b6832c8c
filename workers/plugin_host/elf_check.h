// CheckElfFile: whether a file is an ELF shared object this process can load, read and checked before
// dlopen maps it. dlopen trusts the file's headers: a plugin cut short (a partial copy, a full disk) makes
// it map pages past the end of the file, and the first touch of one kills the process with SIGBUS, with no
// message. So the header, the program headers and every segment they describe must lie within the file,
// and the file must be a shared object of this process's class, byte order and machine.
// Thread safety: any thread. Failure: PluginError naming the path and what is wrong.
#pragma once

#include <string>

#include "core/status.h"

namespace tessel::workers {

Status CheckElfFile(const std::string& path);

}  // namespace tessel::workers
