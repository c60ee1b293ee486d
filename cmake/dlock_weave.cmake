# dlock_weave(<target>)
#
# Runs dlock-codegen on every C++ source of <target> at build time and compiles the woven
# sources (in the build tree) in place of the originals; links dlock::runtime.
#
#   find_package(dlock CONFIG REQUIRED)    # or add_subdirectory(dlock)
#   add_executable(shop main.cpp orders.cpp)
#   dlock_weave(shop)
#
# Each source gets its own custom command. The generator writes a depfile listing every file
# the source includes, so a source is woven again only when it or one of its headers
# changes. A source with no guard in it or its project headers is copied through with a
# #line directive, without a parse. Call dlock_weave() after the target's sources,
# include directories and definitions are set.
#
# Headers that define guarded functions (inline, in a class body, templates) are woven as
# copies next to each woven source. A target that is not woven would compile such a header
# without its guards, so once dlock_weave() is used, every other target of the project gets a
# check at build time (dlock-codegen --unwoven-target, a token scan of its sources and their
# project headers): one that includes such a header, or has a guard itself, fails the build
# with an error naming the target and the header. Targets inside dlock's own tree and
# targets with the property DLOCK_SKIP_WEAVE_CHECK set are not checked.
# Whether a source of `target` is C++: its LANGUAGE property when one is set, else its
# extension (`.C` is C++, `.c` is C; the others in any case). A function, not a variable: the
# deferred check runs in another directory's scope.
function(_dlock_is_cxx_source target source out)
  get_source_file_property(language "${source}" TARGET_DIRECTORY ${target} LANGUAGE)
  get_filename_component(extension "${source}" LAST_EXT)
  string(TOLOWER "${extension}" extension)
  if(language STREQUAL "CXX")
    set(${out} TRUE PARENT_SCOPE)
  elseif(language AND NOT language STREQUAL "NOTFOUND")
    set(${out} FALSE PARENT_SCOPE)
  elseif(source MATCHES "\\.C$" OR extension MATCHES "^\\.(cpp|cc|cxx|c\\+\\+)$")
    set(${out} TRUE PARENT_SCOPE)
  else()
    set(${out} FALSE PARENT_SCOPE)
  endif()
endfunction()

# The flags of every build type (-DNDEBUG, ...), so that the generator sees the same #if
# branches and includes as the compiler; flags clang does not know are dropped by the
# generator.
function(_dlock_config_flags out)
  separate_arguments(flags UNIX_COMMAND "${CMAKE_CXX_FLAGS}")
  foreach(config IN ITEMS Debug Release RelWithDebInfo MinSizeRel)
    string(TOUPPER "${config}" upper)
    separate_arguments(flags_of_config UNIX_COMMAND "${CMAKE_CXX_FLAGS_${upper}}")
    foreach(flag IN LISTS flags_of_config)
      list(APPEND flags "$<$<CONFIG:${config}>:${flag}>")
    endforeach()
  endforeach()
  set(${out} "${flags}" PARENT_SCOPE)
endfunction()

# The include directories of a target as a generator expression, less the compiler's own
# (/usr/include, ...): a package whose imported target lists one (the compiler leaves it out)
# would otherwise make the generator read every system header as a project header.
function(_dlock_include_directories target out)
  set(implicit "")
  foreach(dir IN LISTS CMAKE_CXX_IMPLICIT_INCLUDE_DIRECTORIES)
    string(REGEX REPLACE "([][+.*()^$?|\\])" "\\\\\\1" dir "${dir}")
    list(APPEND implicit "${dir}")
  endforeach()
  set(all "$<TARGET_PROPERTY:${target},INCLUDE_DIRECTORIES>")
  if(implicit)
    list(JOIN implicit "|" alternatives)
    set(${out} "$<FILTER:${all},EXCLUDE,^(${alternatives})/?$>" PARENT_SCOPE)
  else()
    set(${out} "${all}" PARENT_SCOPE)
  endif()
endfunction()

function(dlock_weave target)
  if(NOT TARGET ${target})
    message(FATAL_ERROR "dlock_weave: no target named '${target}'")
  endif()
  if(NOT TARGET dlock::codegen)
    message(FATAL_ERROR "dlock_weave: the generator dlock::codegen is not available "
                        "(build dlock with DLOCK_BUILD_CODEGEN=ON, or install it)")
  endif()
  get_target_property(sources ${target} SOURCES)
  get_target_property(source_dir ${target} SOURCE_DIR)
  get_target_property(binary_dir ${target} BINARY_DIR)
  set(out_root "${binary_dir}/dlock_woven/${target}")

  # The flags that matter to a parse: include paths, definitions, the language standard.
  # Usage requirements of linked targets are part of these target properties.
  # (Each is quoted where it is used: a list variable would split them at the ';'.)
  _dlock_include_directories(${target} includes)
  set(defines "$<TARGET_PROPERTY:${target},COMPILE_DEFINITIONS>")
  set(standard "$<TARGET_PROPERTY:${target},CXX_STANDARD>")
  set(options "$<TARGET_PROPERTY:${target},COMPILE_OPTIONS>")
  _dlock_config_flags(config_flags)

  set(woven_sources "")
  foreach(source IN LISTS sources)
    if(source MATCHES "\\$<")
      # Its guards would silently stay unwoven: refuse rather than build an unguarded program.
      message(FATAL_ERROR "dlock_weave(${target}): the source '${source}' is a generator "
                          "expression, which dlock_weave cannot weave; list the file itself")
    endif()
    _dlock_is_cxx_source(${target} "${source}" is_cxx)
    if(NOT is_cxx)
      list(APPEND woven_sources "${source}")  # headers, C files
      continue()
    endif()
    # A relative name is the source directory's file, or else (like CMake itself does) a
    # file generated in the binary directory.
    get_filename_component(absolute "${source}" ABSOLUTE BASE_DIR "${source_dir}")
    if(NOT IS_ABSOLUTE "${source}" AND NOT EXISTS "${absolute}")
      get_source_file_property(generated "${binary_dir}/${source}" TARGET_DIRECTORY ${target} GENERATED)
      if(generated)
        set(absolute "${binary_dir}/${source}")
      endif()
    endif()
    # What the source itself adds to the compile: kept for the generator and the woven file.
    get_source_file_property(source_defines "${source}" TARGET_DIRECTORY ${target} COMPILE_DEFINITIONS)
    get_source_file_property(source_includes "${source}" TARGET_DIRECTORY ${target} INCLUDE_DIRECTORIES)
    get_source_file_property(source_options "${source}" TARGET_DIRECTORY ${target} COMPILE_OPTIONS)
    foreach(list_name IN ITEMS source_defines source_includes source_options)
      if(NOT ${list_name})  # unset properties read as NOTFOUND
        set(${list_name} "")
      endif()
    endforeach()
    set(source_flags "")
    foreach(define IN LISTS source_defines)
      list(APPEND source_flags "-D${define}")
    endforeach()
    foreach(include IN LISTS source_includes)
      list(APPEND source_flags "-I${include}")
    endforeach()
    if(source_options)
      list(APPEND source_flags ${source_options})
    endif()
    get_filename_component(original_dir "${absolute}" DIRECTORY)
    file(RELATIVE_PATH relative "${source_dir}" "${absolute}")
    if(relative MATCHES "^\\.\\./")
      # Outside the target's directory: keep the name, make it unique by its path's hash.
      string(SHA1 hash "${absolute}")
      string(SUBSTRING "${hash}" 0 8 hash)
      get_filename_component(name "${absolute}" NAME)
      set(relative "external/${hash}/${name}")
    endif()
    set(woven "${out_root}/${relative}")
    add_custom_command(
      OUTPUT "${woven}"
      COMMAND dlock::codegen "${absolute}" -o "${woven}" --depfile "${woven}.d"
              --header-dir "${out_root}/.headers" --
              "$<$<BOOL:${includes}>:-I$<JOIN:${includes},;-I>>"
              "$<$<BOOL:${defines}>:-D$<JOIN:${defines},;-D>>"
              "$<$<BOOL:${standard}>:-std=c++${standard}>"
              "${options}" ${config_flags} ${source_flags}
              -iquote "${original_dir}"
      DEPENDS "${absolute}" dlock::codegen
      DEPFILE "${woven}.d"
      COMMENT "Weaving ${relative}"
      COMMAND_EXPAND_LISTS
      VERBATIM)
    # The woven file lives in the build tree: its quoted includes are still found next to
    # the original.
    set(woven_options "-iquote;${original_dir}")
    if(source_options)
      list(PREPEND woven_options ${source_options})
    endif()
    set_source_files_properties("${woven}" PROPERTIES
      GENERATED TRUE
      COMPILE_OPTIONS "${woven_options}")
    if(source_defines)
      set_source_files_properties("${woven}" PROPERTIES COMPILE_DEFINITIONS "${source_defines}")
    endif()
    if(source_includes)
      set_source_files_properties("${woven}" PROPERTIES INCLUDE_DIRECTORIES "${source_includes}")
    endif()
    list(APPEND woven_sources "${woven}")
  endforeach()
  set_property(TARGET ${target} PROPERTY SOURCES ${woven_sources})
  set_property(TARGET ${target} PROPERTY DLOCK_WOVEN TRUE)
  target_link_libraries(${target} PRIVATE dlock::runtime)
  get_property(check_planned GLOBAL PROPERTY DLOCK_UNWOVEN_CHECK_PLANNED)
  if(NOT check_planned)
    set_property(GLOBAL PROPERTY DLOCK_UNWOVEN_CHECK_PLANNED TRUE)
    cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL _dlock_check_unwoven_targets)
  endif()
endfunction()

function(_dlock_targets_in dir out)
  get_property(targets DIRECTORY "${dir}" PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY "${dir}" PROPERTY SUBDIRECTORIES)
  foreach(subdir IN LISTS subdirs)
    _dlock_targets_in("${subdir}" more)
    list(APPEND targets ${more})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

# Run at the end of the top-level CMakeLists.txt, once dlock_weave() was called somewhere.
function(_dlock_check_unwoven_targets)
  get_property(own_dir GLOBAL PROPERTY DLOCK_OWN_SOURCE_DIR)
  _dlock_config_flags(config_flags)
  _dlock_targets_in("${CMAKE_SOURCE_DIR}" targets)
  foreach(target IN LISTS targets)
    get_target_property(type ${target} TYPE)
    get_target_property(woven ${target} DLOCK_WOVEN)
    get_target_property(skip ${target} DLOCK_SKIP_WEAVE_CHECK)
    get_target_property(source_dir ${target} SOURCE_DIR)
    if(woven OR skip OR NOT type MATCHES "^(EXECUTABLE|STATIC_LIBRARY|SHARED_LIBRARY|MODULE_LIBRARY|OBJECT_LIBRARY)$")
      continue()
    endif()
    if(own_dir)
      file(RELATIVE_PATH inside "${own_dir}" "${source_dir}")
      if(NOT inside MATCHES "^\\.\\./")
        continue()
      endif()
    endif()
    get_target_property(sources ${target} SOURCES)
    set(checked "")
    set(source_flags "")  # what sources add, for all of them: the scan may only read more
    foreach(source IN LISTS sources)
      _dlock_is_cxx_source(${target} "${source}" is_cxx)
      if(source MATCHES "\\$<" OR NOT is_cxx)
        continue()
      endif()
      get_filename_component(absolute "${source}" ABSOLUTE BASE_DIR "${source_dir}")
      if(EXISTS "${absolute}")
        list(APPEND checked "${absolute}")
      endif()
      get_source_file_property(source_includes "${source}" TARGET_DIRECTORY ${target} INCLUDE_DIRECTORIES)
      get_source_file_property(source_options "${source}" TARGET_DIRECTORY ${target} COMPILE_OPTIONS)
      if(source_includes)
        foreach(include IN LISTS source_includes)
          list(APPEND source_flags "-I${include}")
        endforeach()
      endif()
      if(source_options)
        list(APPEND source_flags ${source_options})
      endif()
    endforeach()
    if(NOT checked)
      continue()
    endif()
    # What the scan needs: where includes are found, and the definitions (quoted one by one
    # below: the lists must not split at the ';' of the generator expressions).
    _dlock_include_directories(${target} includes)
    set(defines "$<TARGET_PROPERTY:${target},COMPILE_DEFINITIONS>")
    set(stamp "${CMAKE_BINARY_DIR}/dlock_woven/unwoven-check/${target}.stamp")
    add_custom_command(
      OUTPUT "${stamp}"
      COMMAND dlock::codegen --unwoven-target ${target} ${checked} -o "${stamp}"
              --depfile "${stamp}.d" --
              "$<$<BOOL:${includes}>:-I$<JOIN:${includes},;-I>>"
              "$<$<BOOL:${defines}>:-D$<JOIN:${defines},;-D>>"
              "$<TARGET_PROPERTY:${target},COMPILE_OPTIONS>" ${config_flags} ${source_flags}
      DEPENDS ${checked} dlock::codegen
      DEPFILE "${stamp}.d"
      COMMENT "Checking that ${target} compiles no dlock guard unwoven"
      COMMAND_EXPAND_LISTS
      VERBATIM)
    add_custom_target(${target}_dlock_unwoven_check DEPENDS "${stamp}")
    add_dependencies(${target} ${target}_dlock_unwoven_check)
  endforeach()
endfunction()
