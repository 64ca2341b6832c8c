// The host's side of the opaque tessel_status handle of include/tessel/plugin.h: how one is made for a
// plugin, and how one coming back from a plugin becomes a Status and is freed.
// Ownership: MakeHostStatus returns a handle that the plugin hands back to the host (a kernel or init
// returns it); TakeStatus frees it. Thread safety: any thread.
#pragma once

#include <tessel/plugin.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

struct tessel_status {
  int32_t code;
  std::string message;
};

namespace tessel::workers {

// Never returns null: if the status cannot be allocated, a static "out of memory" status is returned,
// which TakeStatus recognises and does not free.
tessel_status* MakeHostStatus(int32_t code, const char* message) noexcept;

// Converts a plugin's status into a Status with the message "<context>: <message>" and frees it.
// Null means success. Codes outside tessel_status_code become kInternal.
Status TakeStatus(tessel_status* status, std::string_view context);

}  // namespace tessel::workers
