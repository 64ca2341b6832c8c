# Fails when a *_test.cc under the source tree is not compiled into a registered test binary.
# Usage: cmake -DSOURCE_DIR=<checkout> -DREGISTERED=<build>/registered_tests.txt -P CheckTestsRegistered.cmake
# The exclusions (build*/ folders, hidden folders) are matched against the path relative to SOURCE_DIR,
# so a checkout that itself lives under e.g. /builds/... (GitLab CI) or /home/u/.src/... is still checked.
if(NOT SOURCE_DIR OR NOT REGISTERED)
  message(FATAL_ERROR "usage: cmake -DSOURCE_DIR=... -DREGISTERED=... -P ${CMAKE_CURRENT_LIST_FILE}")
endif()
cmake_policy(SET CMP0009 NEW)  # do not follow symlinks (e.g. build/bench-venv/lib64) while globbing
get_filename_component(SOURCE_DIR "${SOURCE_DIR}" ABSOLUTE)
file(GLOB_RECURSE all_tests RELATIVE "${SOURCE_DIR}" "${SOURCE_DIR}/*_test.cc")
file(STRINGS "${REGISTERED}" registered)
set(missing "")
set(checked 0)
foreach(rel ${all_tests})
  if(rel MATCHES "(^|/)build[^/]*/" OR rel MATCHES "(^|/)\\.")
    continue()
  endif()
  math(EXPR checked "${checked} + 1")
  set(t "${SOURCE_DIR}/${rel}")
  list(FIND registered "${t}" idx)
  if(idx EQUAL -1)
    list(APPEND missing "${t}")
  endif()
endforeach()
if(missing)
  string(REPLACE ";" "\n  " pretty "${missing}")
  message(FATAL_ERROR "these *_test.cc files are not registered with tessel_add_test():\n  ${pretty}")
endif()
if(checked EQUAL 0)
  message(FATAL_ERROR "no *_test.cc files found under ${SOURCE_DIR} (outside build*/ and hidden folders): "
                      "nothing was checked")
endif()
message(STATUS "all ${checked} *_test.cc files under ${SOURCE_DIR} are registered")
