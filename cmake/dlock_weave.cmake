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
  set(includes "$<TARGET_PROPERTY:${target},INCLUDE_DIRECTORIES>")
  set(defines "$<TARGET_PROPERTY:${target},COMPILE_DEFINITIONS>")
  set(standard "$<TARGET_PROPERTY:${target},CXX_STANDARD>")

  set(woven_sources "")
  foreach(source IN LISTS sources)
    get_filename_component(extension "${source}" LAST_EXT)
    string(TOLOWER "${extension}" extension)
    if(source MATCHES "^\\$<" OR NOT extension MATCHES "^\\.(cpp|cc|cxx|c\\+\\+)$")
      list(APPEND woven_sources "${source}")  # headers, C files, generator expressions
      continue()
    endif()
    get_filename_component(absolute "${source}" ABSOLUTE BASE_DIR "${source_dir}")
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
      COMMAND dlock::codegen "${absolute}" -o "${woven}" --depfile "${woven}.d" --
              "$<$<BOOL:${includes}>:-I$<JOIN:${includes},;-I>>"
              "$<$<BOOL:${defines}>:-D$<JOIN:${defines},;-D>>"
              "$<$<BOOL:${standard}>:-std=c++${standard}>"
              -iquote "${original_dir}"
      DEPENDS "${absolute}" dlock::codegen
      DEPFILE "${woven}.d"
      COMMENT "Weaving ${relative}"
      COMMAND_EXPAND_LISTS
      VERBATIM)
    # The woven file lives in the build tree: its quoted includes are still found next to
    # the original.
    set_source_files_properties("${woven}" PROPERTIES
      GENERATED TRUE
      COMPILE_OPTIONS "-iquote;${original_dir}")
    list(APPEND woven_sources "${woven}")
  endforeach()
  set_property(TARGET ${target} PROPERTY SOURCES ${woven_sources})
  target_link_libraries(${target} PRIVATE dlock::runtime)
endfunction()
