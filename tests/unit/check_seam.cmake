# The executor seam (DESIGN.md "Executors"): the coordinator, the protocol and the worker runtime name no
# model and no job kind; they reach both only through the planner and executor registries. This check
# fails, naming the file and the line, when one of them does.
#   cmake -DSOURCE_DIR=<repo> -P tests/unit/check_seam.cmake
if(NOT SOURCE_DIR)
  message(FATAL_ERROR "usage: cmake -DSOURCE_DIR=<repository root> -P check_seam.cmake")
endif()
set(files
  orchestrator/coordinator.h orchestrator/coordinator.cc
  workers/protocol.h workers/protocol.cc
  workers/worker.h workers/worker.cc
  orchestrator/cli_run.cc)
# Models, job kinds, and the types that would let the code branch on them.
# Whole words, any case ("PollMessage" is not "llm").
set(forbidden "(^|[^A-Za-z])([Rr][Gg][Cc][Nn]|[Rr][Gg][Aa][Tt]|[Hh][Gg][Tt]|[Rr][Gg][Nn][Nn]|[Ll][Ll][Mm]|[Gg][Pp][Tt])([^A-Za-z]|$)|JobKind|ModelName|GraphPlanner|Rgnn[A-Z][a-z]+|Llm[A-Z][a-z]+")
set(problems "")
foreach(f ${files})
  if(NOT EXISTS "${SOURCE_DIR}/${f}")
    list(APPEND problems "${f}: missing (the check lists it)")
    continue()
  endif()
  file(STRINGS "${SOURCE_DIR}/${f}" lines)
  set(n 0)
  foreach(line IN LISTS lines)
    math(EXPR n "${n} + 1")
    if(line MATCHES "${forbidden}")
      list(APPEND problems "${f}:${n}: names '${CMAKE_MATCH_0}': ${line}")
    endif()
  endforeach()
endforeach()
if(problems)
  string(REPLACE ";" "\n  " pretty "${problems}")
  message(FATAL_ERROR "the executor seam leaks a model or job kind:\n  ${pretty}")
endif()
list(LENGTH files n)
message(STATUS "the seam holds: ${n} files name no model and no job kind")
