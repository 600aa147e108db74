# Frontend test extras (included at the end of tests/CMakeLists.txt).

# lit.sh exits 77 for a test whose REQUIRES are not met (e.g. no ptxas).
foreach(f ${GOLDEN})
  file(RELATIVE_PATH rel ${CMAKE_CURRENT_SOURCE_DIR} ${f})
  set_tests_properties(${rel} PROPERTIES SKIP_RETURN_CODE 77)
endforeach()

# Hostile and huge inputs for the frontend (nesting, 1 MB names, binary
# garbage, 5 MB graphs): clean errors, no crash, within seconds.
if(TARGET fusec)
  add_test(NAME golden/frontend/stress
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/golden/frontend/stress.sh $<TARGET_FILE:fusec>)
  set_tests_properties(golden/frontend/stress PROPERTIES TIMEOUT 300)
  # The random-graph differential tester (tools/fgdiff.c, docs/testing.md):
  # 2000 fixed seeds in four parts (ctest -j runs them side by side); the
  # sanitizer builds skip fuzz/ and run 150 other seeds instead.
  foreach(part 0 1 2 3)
    math(EXPR first "1 + ${part} * 500")
    add_test(NAME fuzz/fgdiff_${first} COMMAND $<TARGET_FILE:fgdiff> --seed ${first} --count 500)
    set_tests_properties(fuzz/fgdiff_${first} PROPERTIES TIMEOUT 900 LABELS difftest)
  endforeach()
  add_test(NAME difftest/fgdiff_sanitized COMMAND $<TARGET_FILE:fgdiff> --seed 100001 --count 150)
  set_tests_properties(difftest/fgdiff_sanitized PROPERTIES TIMEOUT 900 LABELS difftest)
  # Over a symbolic leading size T (fgdiff --symbolic): the passes on the
  # symbolic graph, the interpreter at several sizes the facts admit.
  add_test(NAME fuzz/fgdiff_symbolic COMMAND $<TARGET_FILE:fgdiff> --symbolic --seed 1 --count 500)
  set_tests_properties(fuzz/fgdiff_symbolic PROPERTIES TIMEOUT 900 LABELS difftest)
  add_test(NAME difftest/fgdiff_symbolic_sanitized
           COMMAND $<TARGET_FILE:fgdiff> --symbolic --seed 100001 --count 60)
  set_tests_properties(difftest/fgdiff_symbolic_sanitized PROPERTIES TIMEOUT 900 LABELS difftest)
  # The generated plan blocks are what tests/update_golden.sh writes today.
  add_test(NAME golden/update_golden
           COMMAND bash -c "t=$(mktemp -d) && cp ${CMAKE_CURRENT_SOURCE_DIR}/golden/opt/zero_size.fg $t/ && \
bash ${CMAKE_CURRENT_SOURCE_DIR}/update_golden.sh --fusec $<TARGET_FILE:fusec> $t/zero_size.fg && \
cmp ${CMAKE_CURRENT_SOURCE_DIR}/golden/opt/zero_size.fg $t/zero_size.fg; rc=$?; rm -rf $t; exit $rc")
  add_test(NAME golden/frontend/output_file
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/golden/frontend/output_file.sh $<TARGET_FILE:fusec> ${PROJECT_SOURCE_DIR})
endif()

# libFuzzer harness for fg_parse. It needs clang's fuzzer runtime (Debian:
# libclang-rt-19-dev), so it is built with clang directly, whatever the
# project's compiler, and only when a trial link works.
find_program(FG_FUZZ_CLANG NAMES clang-19 clang)
set(FG_FUZZ_FLAGS -std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined
    -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
set(FG_FUZZ_OK FALSE)
if(FG_FUZZ_CLANG)
  set(probe ${CMAKE_CURRENT_BINARY_DIR}/fuzz_probe)
  file(WRITE ${probe}.c "#include <stddef.h>\n#include <stdint.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n")
  execute_process(COMMAND ${FG_FUZZ_CLANG} ${FG_FUZZ_FLAGS} ${probe}.c -o ${probe}
                  RESULT_VARIABLE probe_rc OUTPUT_QUIET ERROR_QUIET)
  if(probe_rc EQUAL 0)
    set(FG_FUZZ_OK TRUE)
  endif()
endif()
set(FG_FUZZ_BIN ${CMAKE_CURRENT_BINARY_DIR}/fuzz_parse)
if(FG_FUZZ_OK)
  file(GLOB FG_FUZZ_SRC CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/ir/*.c ${PROJECT_SOURCE_DIR}/frontend/*.c)
  list(APPEND FG_FUZZ_SRC ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_parse.c)
  add_custom_command(OUTPUT ${FG_FUZZ_BIN}
    COMMAND ${FG_FUZZ_CLANG} ${FG_FUZZ_FLAGS} -I${PROJECT_SOURCE_DIR}/ir -I${PROJECT_SOURCE_DIR}/frontend
            ${FG_FUZZ_SRC} -lm -o ${FG_FUZZ_BIN}
    DEPENDS ${FG_FUZZ_SRC} ${PROJECT_SOURCE_DIR}/ir/ir.h ${PROJECT_SOURCE_DIR}/frontend/lexer.h
    COMMENT "Building the fuzz_parse libFuzzer harness with ${FG_FUZZ_CLANG}")
  add_custom_target(fuzz_parse ALL DEPENDS ${FG_FUZZ_BIN})
else()
  message(STATUS "clang with -fsanitize=fuzzer not usable: fuzz/parse_short will be skipped "
                 "(Debian/Ubuntu: apt-get install libclang-rt-19-dev)")
endif()
add_test(NAME fuzz/parse_short
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/run_fuzz.sh ${FG_FUZZ_BIN} ${PROJECT_SOURCE_DIR} 20)
set_tests_properties(fuzz/parse_short PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120)
