# One diagnostic test: runs dlock-codegen on INPUT, which must fail, and checks stderr
# against the expectations written in INPUT itself, FileCheck style:
#
#   [[dlock::guard("order:<idd>")]] void place(long id) {}
#   // CHECK: :[[@LINE-1]]:23: error: unknown parameter 'idd' in lock key; did you mean 'id'?
#   // CHECK-NEXT: [[dlock::guard("order:<idd>")]] void place(long id) {}
#
# `CHECK:` finds its text in a later line of stderr than the previous match, `CHECK-NEXT:`
# in the very next line. [[@LINE]], [[@LINE-N]], [[@LINE+N]] are line numbers relative to the
# CHECK line, %S is INPUT's directory. Every `error:` line of stderr must be matched by a
# CHECK. The exit status must be 1, and neither the output nor the depfile may remain (both
# exist, stale, before the run).
#
#   cmake -DCODEGEN=... -DINPUT=... -DOUTPUT=... -DFLAGS=... -P check_diagnostics.cmake
cmake_minimum_required(VERSION 3.20)

# Splits text into a list of lines. Characters that CMake lists treat specially are
# replaced by markers first; texts are compared in that form and decoded for messages.
function(split_lines text out)
  string(REPLACE "\\" "<BSL>" text "${text}")
  string(REPLACE ";" "<SEMI>" text "${text}")
  string(REPLACE "[" "<LSQ>" text "${text}")
  string(REPLACE "]" "<RSQ>" text "${text}")
  string(REPLACE "\r" "" text "${text}")
  string(REPLACE "\n" ";" text "${text}")
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

function(decode text out)
  string(REPLACE "<BSL>" "\\" text "${text}")
  string(REPLACE "<SEMI>" ";" text "${text}")
  string(REPLACE "<LSQ>" "[" text "${text}")
  string(REPLACE "<RSQ>" "]" text "${text}")
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

get_filename_component(input_dir "${INPUT}" DIRECTORY)
set(depfile "${OUTPUT}.d")
file(WRITE "${OUTPUT}" "stale output\n")
file(WRITE "${depfile}" "stale depfile\n")
set(command "${CODEGEN}" "${INPUT}" -o "${OUTPUT}" --depfile "${depfile}" -- ${FLAGS})
list(JOIN command " " command_text)
execute_process(COMMAND ${command} RESULT_VARIABLE status ERROR_VARIABLE errors TIMEOUT 60)

set(failures "")
if(NOT status STREQUAL "1")
  string(APPEND failures "exit status ${status}, expected 1\n")
endif()
foreach(file IN ITEMS "${OUTPUT}" "${depfile}")
  if(EXISTS "${file}")
    string(APPEND failures "${file} exists after a failed run\n")
  endif()
endforeach()

# The expectations, with line numbers resolved.
file(READ "${INPUT}" source)
split_lines("${source}" source_lines)
set(check_kinds "")
set(check_texts "")
set(number 0)
foreach(line IN LISTS source_lines)
  math(EXPR number "${number} + 1")
  if(NOT line MATCHES "// CHECK(-NEXT)?: (.*)$")
    continue()
  endif()
  set(kind "CHECK${CMAKE_MATCH_1}")
  set(text "${CMAKE_MATCH_2}")
  while(text MATCHES "<LSQ><LSQ>@LINE([+-][0-9]+)?<RSQ><RSQ>")
    set(marker "${CMAKE_MATCH_0}")
    set(offset "${CMAKE_MATCH_1}")
    if(offset STREQUAL "")
      set(offset "+0")
    endif()
    math(EXPR target "${number} ${offset}")
    string(REPLACE "${marker}" "${target}" text "${text}")
  endwhile()
  string(REPLACE "%S" "${input_dir}" text "${text}")
  list(APPEND check_kinds "${kind}")
  list(APPEND check_texts "${text}")
endforeach()
list(LENGTH check_kinds check_count)
if(check_count EQUAL 0)
  string(APPEND failures "no CHECK lines in ${INPUT}\n")
endif()

# Match them in order against stderr.
split_lines("${errors}" error_lines)
list(LENGTH error_lines error_count)
set(cursor 0)
set(matched "")
if(check_count GREATER 0)
  math(EXPR last_check "${check_count} - 1")
  foreach(i RANGE ${last_check})
    list(GET check_kinds ${i} kind)
    list(GET check_texts ${i} text)
    set(found -1)
    set(j ${cursor})
    while(j LESS error_count)
      list(GET error_lines ${j} line)
      string(FIND "${line}" "${text}" position)
      if(position GREATER -1)
        set(found ${j})
        break()
      endif()
      if(kind STREQUAL "CHECK-NEXT")
        break()
      endif()
      math(EXPR j "${j} + 1")
    endwhile()
    if(found EQUAL -1)
      decode("${text}" shown)
      string(APPEND failures "${kind}: not found: ${shown}\n")
      break()
    endif()
    list(APPEND matched ${found})
    math(EXPR cursor "${found} + 1")
  endforeach()
endif()

# No error may go unexpected.
set(j 0)
foreach(line IN LISTS error_lines)
  if(line MATCHES ": error: " AND NOT j IN_LIST matched)
    decode("${line}" shown)
    string(APPEND failures "unexpected: ${shown}\n")
  endif()
  math(EXPR j "${j} + 1")
endforeach()

if(NOT failures STREQUAL "")
  message(FATAL_ERROR "${failures}\ncommand: ${command_text}\nstderr:\n${errors}")
endif()
