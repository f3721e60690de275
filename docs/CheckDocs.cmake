# Fails when docs/generated/ differs from what ODS generates now.
foreach(name ZestDialect.md ZestPasses.md ZestConversionPasses.md)
  execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files
                  ${GENERATED}/${name} ${COMMITTED}/${name}
                  RESULT_VARIABLE different)
  if(different)
    message(FATAL_ERROR "docs/generated/${name} is stale or missing: "
                        "run `ninja -C build zest-doc` and commit it")
  endif()
endforeach()
