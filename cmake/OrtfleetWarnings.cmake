# One place for the warning policy: every target of ours calls ortfleet_set_warnings().
function(ortfleet_set_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wconversion
                         -Wno-sign-conversion -Wnon-virtual-dtor -Wold-style-cast -Wcast-align
                         -Woverloaded-virtual -Wnull-dereference -Wimplicit-fallthrough)
  # GCC 12 reports bogus -Wrestrict overlaps inside libstdc++'s string concatenation at -O2/-O3
  # (GCC bug 105329); the check stays on for other compilers.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
    target_compile_options(${target} PRIVATE -Wno-restrict)
  endif()
  # A unity build (ORTFLEET_UNITY_BUILD) compiles our .cpp files as includes of one file, and GCC then
  # flags a class that uses a type of a .cpp file's anonymous namespace as if a header did it.
  if(CMAKE_UNITY_BUILD AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    target_compile_options(${target} PRIVATE -Wno-subobject-linkage)
  endif()
  if(ORTFLEET_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
