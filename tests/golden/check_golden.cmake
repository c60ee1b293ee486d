# One golden test: runs dlock-codegen on INPUT and compares the woven file with EXPECTED.
# The absolute path of the golden directory, which the woven file names in its #line
# directives, reads as @GOLDEN_DIR@ in EXPECTED so that the files do not depend on where the
# tree is checked out.
#
#   cmake -DCODEGEN=... -DINPUT=... -DEXPECTED=... -DOUTPUT=... -DGOLDEN_DIR=... \
#         -DFLAGS=... -DDIFF=... -DUPDATE_COMMAND=... -P check_golden.cmake
#
# With DLOCK_UPDATE_GOLDEN=1 in the environment, EXPECTED is rewritten instead.
cmake_minimum_required(VERSION 3.20)

set(command "${CODEGEN}" "${INPUT}" -o "${OUTPUT}" -- ${FLAGS})
execute_process(COMMAND ${command} RESULT_VARIABLE status ERROR_VARIABLE errors)
list(JOIN command " " command_text)
if(NOT status STREQUAL "0")
  message(FATAL_ERROR "dlock-codegen failed (${status}):\n${errors}\ncommand: ${command_text}")
endif()

file(READ "${OUTPUT}" actual)
# Woven copies of headers follow the source, each under a line naming it; their directory,
# OUTPUT.headers/<hash of the original path>, reads as @HEADERS@.
# The hashed directories depend on where the tree is checked out, so the copies are listed in
# the order of their paths below those directories.
file(GLOB_RECURSE copies LIST_DIRECTORIES false RELATIVE "${OUTPUT}.headers" "${OUTPUT}.headers/*")
set(named_copies "")
foreach(copy IN LISTS copies)
  string(REGEX REPLACE "^[0-9a-f]+/" "" name "${copy}")
  list(APPEND named_copies "${name}|${copy}")
endforeach()
list(SORT named_copies)
foreach(entry IN LISTS named_copies)
  string(REGEX REPLACE "^[^|]*\\|" "" copy "${entry}")
  file(READ "${OUTPUT}.headers/${copy}" copy_text)
  string(APPEND actual "// ---- woven copy ${OUTPUT}.headers/${copy} ----\n${copy_text}")
endforeach()
string(REPLACE "${OUTPUT}.headers/" "@HEADERS@/" actual "${actual}")
string(REGEX REPLACE "@HEADERS@/[0-9a-f]+/" "@HEADERS@/" actual "${actual}")
string(REPLACE "${GOLDEN_DIR}" "@GOLDEN_DIR@" actual "${actual}")

if("$ENV{DLOCK_UPDATE_GOLDEN}" STREQUAL "1")
  file(WRITE "${EXPECTED}" "${actual}")
  message(STATUS "updated ${EXPECTED}")
  return()
endif()

if(NOT EXISTS "${EXPECTED}")
  message(FATAL_ERROR "missing ${EXPECTED}\nCreate it with: ${UPDATE_COMMAND}")
endif()
file(READ "${EXPECTED}" expected)
if(actual STREQUAL expected)
  return()
endif()

set(normalized "${OUTPUT}.normalized")
file(WRITE "${normalized}" "${actual}")
set(difference "(no diff program found; compare ${EXPECTED} with ${normalized})")
if(DIFF)
  execute_process(COMMAND "${DIFF}" -u "${EXPECTED}" "${normalized}" OUTPUT_VARIABLE difference)
endif()
message(FATAL_ERROR
  "woven output differs from ${EXPECTED}:\n${difference}\n"
  "command: ${command_text}\n"
  "If the new output is right, regenerate the golden files with:\n  ${UPDATE_COMMAND}")
