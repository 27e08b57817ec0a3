# Warnings, hardening and sanitizer flags shared by every target of the project.
# Targets opt in with sray_apply_project_flags(<target>) so that imported
# third-party targets never see -Werror.

set(SRAY_WARNING_FLAGS
    -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wold-style-cast
    -Wcast-align -Wunused -Woverloaded-virtual -Wconversion -Wsign-conversion
    -Wdouble-promotion -Wformat=2 -Wimplicit-fallthrough)
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  # GCC 12 reports std::variant<..., std::string> members as maybe-uninitialized
  # after inlining (GCC bug 105562 and relatives): noise, not a finding.
  list(APPEND SRAY_WARNING_FLAGS -Wno-maybe-uninitialized)
endif()
if(SRAY_WERROR)
  list(APPEND SRAY_WARNING_FLAGS -Werror)
endif()

set(SRAY_HARDENING_COMPILE_FLAGS -fstack-protector-strong -fstack-clash-protection)
if(NOT SRAY_SANITIZER)
  # _FORTIFY_SOURCE needs optimisation and conflicts with sanitizer interceptors.
  list(APPEND SRAY_HARDENING_COMPILE_FLAGS
       $<$<NOT:$<CONFIG:Debug>>:-U_FORTIFY_SOURCE -D_FORTIFY_SOURCE=2>)
endif()
set(SRAY_HARDENING_LINK_FLAGS -Wl,-z,relro -Wl,-z,now -Wl,-z,noexecstack)

# Debug information. "lines" keeps file and line tables, which is what
# backtraces, perf and sanitizer reports use, and builds 15-25% faster per file
# than "full" (measured on this project's files with GCC 12); "full" adds
# variables and types for stepping through in a debugger. It applies to the
# configurations that carry debug information (RelWithDebInfo, Debug) and to
# every target, so it is a global option: GCC and Clang take the last -g.
set(SRAY_DEBUG_INFO "lines" CACHE STRING "Debug information: lines or full")
set_property(CACHE SRAY_DEBUG_INFO PROPERTY STRINGS lines full)
if(SRAY_DEBUG_INFO STREQUAL "lines")
  add_compile_options($<$<CONFIG:RelWithDebInfo,Debug>:-g1>)
elseif(NOT SRAY_DEBUG_INFO STREQUAL "full")
  message(FATAL_ERROR "sray: unknown SRAY_DEBUG_INFO '${SRAY_DEBUG_INFO}': use lines or full")
endif()

option(SRAY_BUILD_FUZZERS "Build libFuzzer targets (needs Clang)" OFF)

set(SRAY_SANITIZER_FLAGS "")
if(SRAY_BUILD_FUZZERS)
  # Every project target gets libFuzzer's coverage and ASan/UBSan, so the
  # fuzzers are guided by (and check) the library code they call, not only
  # their own file.
  set(SRAY_SANITIZER_FLAGS -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
                           -fno-omit-frame-pointer)
elseif(SRAY_SANITIZER STREQUAL "address")
  set(SRAY_SANITIZER_FLAGS -fsanitize=address -fno-omit-frame-pointer)
elseif(SRAY_SANITIZER STREQUAL "undefined")
  set(SRAY_SANITIZER_FLAGS -fsanitize=undefined -fno-sanitize-recover=undefined)
elseif(SRAY_SANITIZER STREQUAL "thread")
  set(SRAY_SANITIZER_FLAGS -fsanitize=thread)
elseif(SRAY_SANITIZER)
  message(FATAL_ERROR "sray: unknown SRAY_SANITIZER '${SRAY_SANITIZER}': "
                      "use address, undefined, thread or leave it empty")
endif()

function(sray_apply_project_flags target)
  target_compile_options(${target} PRIVATE ${SRAY_WARNING_FLAGS}
                         ${SRAY_HARDENING_COMPILE_FLAGS} ${SRAY_SANITIZER_FLAGS})
  target_link_options(${target} PRIVATE ${SRAY_HARDENING_LINK_FLAGS} ${SRAY_SANITIZER_FLAGS})
endfunction()

# A program that links libsray and is installed under libexec/sray/<directory>
# (examples and the job-wide test checks): the unprivileged test user runs
# the installed copies, which find libsray relative to themselves.
function(sray_add_runtime_program target output_name source directory)
  add_executable(${target} ${source})
  set_target_properties(${target} PROPERTIES OUTPUT_NAME ${output_name}
    INSTALL_RPATH "$ORIGIN/../../../${CMAKE_INSTALL_LIBDIR}")
  target_link_libraries(${target} PRIVATE sray::runtime)
  sray_apply_project_flags(${target})
  install(TARGETS ${target} RUNTIME DESTINATION ${CMAKE_INSTALL_LIBEXECDIR}/sray/${directory})
endfunction()
