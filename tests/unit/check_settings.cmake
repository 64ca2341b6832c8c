# Each setting is declared once (DESIGN.md "Executors"): the structs a worker receives take every value
# from the validated job (or derive it in one named function), so their headers give no member a default.
# Their fields are declared in TESSEL_FIELDS lists (core/fields.h), which value-initialise every member;
# this check fails, naming the file and the line, on a data member with an initialiser of its own (one
# declared outside its list, which tests/unit/workers/payload_fields_test.cc could not see).
#   cmake -DSOURCE_DIR=<repo> -P tests/unit/check_settings.cmake
if(NOT SOURCE_DIR)
  message(FATAL_ERROR "usage: cmake -DSOURCE_DIR=<repository root> -P check_settings.cmake")
endif()
file(GLOB_RECURSE files RELATIVE "${SOURCE_DIR}" "${SOURCE_DIR}/workers/*_settings.h")
list(APPEND files workers/assignment.h)
list(SORT files)
# "  double lr = 3e-4;", "  int32_t stage = 0, stages = 1;", "  std::string dir{"/tmp"};": a declaration
# with an initialiser. Constants (static, constexpr), aliases and statements are not members.
set(member "^[ ]+[A-Za-z_][A-Za-z0-9_:<>, ]*[ &*]+[a-z_][a-z0-9_]*[ ]*(=[^=]|\\{[^}]+\\}<semicolon>)")
set(problems "")
foreach(f ${files})
  # One list element per line (a ';' inside a line would split it: park it first).
  file(READ "${SOURCE_DIR}/${f}" text)
  string(REPLACE ";" "<semicolon>" text "${text}")
  # A backslash would escape the separator, and brackets group list elements in CMake: park them too, so
  # that each line stays one element.
  string(REPLACE "\\" "<bs>" text "${text}")
  string(REPLACE "[" "<lb>" text "${text}")
  string(REPLACE "]" "<rb>" text "${text}")
  string(REPLACE "\n" ";" lines "${text}")
  set(n 0)
  foreach(line IN LISTS lines)
    math(EXPR n "${n} + 1")
    if(line MATCHES "^[ ]*//|static|constexpr|using |return |#define|[(]")
      continue()
    endif()
    if(line MATCHES "${member}")
      string(REPLACE "<semicolon>" "" shown "${line}")
      string(REPLACE "<lb>" "[" shown "${shown}")
      string(REPLACE "<rb>" "]" shown "${shown}")
      list(APPEND problems "${f}:${n}: a member with a default of its own: ${shown}")
    endif()
  endforeach()
endforeach()
if(problems)
  string(REPLACE ";" "\n  " pretty "${problems}")
  message(FATAL_ERROR "worker-side settings declare defaults (take them from the job instead):\n  ${pretty}")
endif()
list(LENGTH files n)
message(STATUS "no defaults in ${n} worker-side settings headers")
