# Finds ZooKeeper's multi-threaded C client (Debian's libzookeeper-mt-dev ships no CMake
# package) and defines Zookeeper::zookeeper_mt.
find_path(Zookeeper_INCLUDE_DIR zookeeper/zookeeper.h)
find_library(Zookeeper_LIBRARY NAMES zookeeper_mt)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(Zookeeper REQUIRED_VARS Zookeeper_LIBRARY Zookeeper_INCLUDE_DIR)
if(Zookeeper_FOUND AND NOT TARGET Zookeeper::zookeeper_mt)
  add_library(Zookeeper::zookeeper_mt UNKNOWN IMPORTED)
  set_target_properties(Zookeeper::zookeeper_mt PROPERTIES
    IMPORTED_LOCATION "${Zookeeper_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${Zookeeper_INCLUDE_DIR}")
endif()
mark_as_advanced(Zookeeper_INCLUDE_DIR Zookeeper_LIBRARY)
