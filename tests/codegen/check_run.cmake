# Runs dlock-codegen once and checks how it ended: the command-line, robustness and depfile
# tests.
#
#   cmake -DCODEGEN=... -DINPUT=... -DOUTPUT=... [-DOPTIONS=...] [-DFLAGS=...]
#         [-DEXPECT_STATUS=N] [-DSTDOUT_CONTAINS=...] [-DSTDERR_CONTAINS=...] [-DSTDERR_LACKS=...]
#         [-DOUTPUT_CONTAINS=...] [-DDEPFILE=... -DDEPFILE_CONTAINS=... -DDEPFILE_LACKS=...]
#         [-DOUTPUT_ABSENT=1] [-DCLEAN_DIR=...] [-DGENERATE=huge_key|huge_unterminated] -P check_run.cmake
#
# Whatever the input, the generator must end with 0 (outputs written), 1 (errors reported)
# or 2 (usage or I/O error), never crash or hang; after 1 no output may remain. Without
# EXPECT_STATUS, 0 and 1 are both fine (garbage may or may not parse). GENERATE writes INPUT
# first, for inputs too big to check in: a guard whose key literal is 1 MiB long, closed or
# left open. List values are separated by '|', as ';' would not survive being forwarded
# through a CMake function.
cmake_minimum_required(VERSION 3.20)

foreach(list_name IN ITEMS OPTIONS FLAGS STDOUT_CONTAINS STDERR_CONTAINS STDERR_LACKS
                           OUTPUT_CONTAINS DEPFILE_CONTAINS DEPFILE_LACKS)
  if(DEFINED ${list_name})
    string(REPLACE "|" ";" ${list_name} "${${list_name}}")
  endif()
endforeach()

if(DEFINED GENERATE)
  string(REPEAT "k" 1048576 long_text)
  if(GENERATE STREQUAL "huge_key")
    file(WRITE "${INPUT}" "[[dlock::guard(\"${long_text}:<id>\")]] void f(int id) { (void)id; }\n")
  elseif(GENERATE STREQUAL "huge_unterminated")
    file(WRITE "${INPUT}" "[[dlock::guard(\"${long_text}\n")
  else()
    message(FATAL_ERROR "unknown GENERATE=${GENERATE}")
  endif()
endif()

if(DEFINED CLEAN_DIR)  # a directory the generator fills, emptied first
  file(REMOVE_RECURSE "${CLEAN_DIR}")
endif()
if(DEFINED OUTPUT)
  file(WRITE "${OUTPUT}" "stale output\n")
  set(output_args -o "${OUTPUT}")
endif()
if(DEFINED DEPFILE)
  list(APPEND output_args --depfile "${DEPFILE}")
endif()
if(DEFINED FLAGS)
  set(flag_args -- ${FLAGS})
endif()
set(command "${CODEGEN}" ${INPUT} ${output_args} ${OPTIONS} ${flag_args})
list(JOIN command " " command_text)
execute_process(COMMAND ${command} RESULT_VARIABLE status OUTPUT_VARIABLE out
                ERROR_VARIABLE errors TIMEOUT 60)
string(SUBSTRING "${errors}" 0 3000 errors_head)
set(context "\ncommand: ${command_text}\nstderr:\n${errors_head}")

if(NOT status MATCHES "^[012]$")
  message(FATAL_ERROR "status '${status}' (a crash or a hang?)${context}")
endif()
if(DEFINED EXPECT_STATUS)
  if(NOT status STREQUAL EXPECT_STATUS)
    message(FATAL_ERROR "status ${status}, expected ${EXPECT_STATUS}${context}")
  endif()
elseif(status STREQUAL "2")
  message(FATAL_ERROR "status 2 (usage or I/O error) on an input that exists${context}")
endif()
if(DEFINED OUTPUT)
  if(status STREQUAL "0" AND NOT EXISTS "${OUTPUT}")
    message(FATAL_ERROR "status 0 but no output${context}")
  elseif((status STREQUAL "1" OR OUTPUT_ABSENT) AND EXISTS "${OUTPUT}")
    message(FATAL_ERROR "status ${status} but the output remains${context}")
  endif()
endif()

function(expect_in what text)
  foreach(needle IN LISTS ARGN)
    string(FIND "${text}" "${needle}" position)
    if(position EQUAL -1)
      message(FATAL_ERROR "${what} lacks '${needle}'${context}\n${what}:\n${text}")
    endif()
  endforeach()
endfunction()

expect_in(stdout "${out}" ${STDOUT_CONTAINS})
expect_in(stderr "${errors}" ${STDERR_CONTAINS})
foreach(needle IN LISTS STDERR_LACKS)
  string(FIND "${errors}" "${needle}" position)
  if(NOT position EQUAL -1)
    message(FATAL_ERROR "stderr holds '${needle}'${context}\nstderr:\n${errors}")
  endif()
endforeach()
if(DEFINED OUTPUT_CONTAINS)
  file(READ "${OUTPUT}" woven)
  expect_in(output "${woven}" ${OUTPUT_CONTAINS})
endif()
if(DEFINED DEPFILE AND status STREQUAL "0")
  file(READ "${DEPFILE}" dependencies)
  expect_in(depfile "${dependencies}" ${DEPFILE_CONTAINS})
  foreach(needle IN LISTS DEPFILE_LACKS)
    string(FIND "${dependencies}" "${needle}" position)
    if(NOT position EQUAL -1)
      message(FATAL_ERROR "depfile holds '${needle}'${context}\ndepfile:\n${dependencies}")
    endif()
  endforeach()
endif()
