# Runs one program and checks its exit status and output (the checker's tests).
#
#   cmake -DPROGRAM=... -DARGS=a|b|c -DEXPECT_STATUS=N [-DEXPECT=regex|regex] -P expect_run.cmake
#
# Every regex must match somewhere in the output (stdout and stderr together). List values
# are separated by '|', as ';' would not survive being forwarded through a CMake function.
cmake_minimum_required(VERSION 3.20)

string(REPLACE "|" ";" args "${ARGS}")
string(REPLACE "|" ";" expect "${EXPECT}")
execute_process(COMMAND "${PROGRAM}" ${args} RESULT_VARIABLE status OUTPUT_VARIABLE output
                ERROR_VARIABLE output)
message("${output}")
if(NOT status STREQUAL "${EXPECT_STATUS}")
  message(FATAL_ERROR "${PROGRAM} ended with ${status}, expected ${EXPECT_STATUS}")
endif()
foreach(pattern IN LISTS expect)
  if(NOT output MATCHES "${pattern}")
    message(FATAL_ERROR "the output does not match '${pattern}'")
  endif()
endforeach()
