# dlock_embed_lua(HEADER): a custom command that writes HEADER, the Lua scripts of runtime/lua
# as C++ string constants in dlock::internal::lua (cmake/embed_lua.cmake). HEADER goes into the
# sources of the target that includes it. Used by the runtime and by the reply fuzzer, which
# compiles a few runtime sources on its own.
set(DLOCK_LUA_SCRIPTS
  ${PROJECT_SOURCE_DIR}/runtime/lua/holders.lua
  ${PROJECT_SOURCE_DIR}/runtime/lua/acquire.lua
  ${PROJECT_SOURCE_DIR}/runtime/lua/acquire_shared.lua
  ${PROJECT_SOURCE_DIR}/runtime/lua/acquire_together.lua
  ${PROJECT_SOURCE_DIR}/runtime/lua/renew.lua
  ${PROJECT_SOURCE_DIR}/runtime/lua/release_lock.lua
  ${PROJECT_SOURCE_DIR}/runtime/lua/release.lua
  ${PROJECT_SOURCE_DIR}/runtime/lua/release_together.lua
  ${PROJECT_SOURCE_DIR}/runtime/lua/force_release.lua
  ${PROJECT_SOURCE_DIR}/runtime/lua/claim_run.lua
  ${PROJECT_SOURCE_DIR}/runtime/lua/finish_run.lua)

function(dlock_embed_lua header)
  add_custom_command(
    OUTPUT ${header}
    COMMAND ${CMAKE_COMMAND} -DOUT=${header} -DNAMESPACE=dlock::internal::lua
            -P ${PROJECT_SOURCE_DIR}/cmake/embed_lua.cmake ${DLOCK_LUA_SCRIPTS}
    DEPENDS ${DLOCK_LUA_SCRIPTS} ${PROJECT_SOURCE_DIR}/cmake/embed_lua.cmake
    COMMENT "Embedding Lua scripts"
    VERBATIM)
endfunction()
