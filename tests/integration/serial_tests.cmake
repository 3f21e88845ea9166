# Read by ctest after the tests doctest_discover_tests found (TEST_INCLUDE_FILES runs in order, and
# doctest's include file comes first): the tests whose name starts with "integration/netns: " run
# alone (RUN_SERIAL). Their login server keeps the 100 ms deadline towards the hash servers, which
# a machine busy with another load test can miss; and they make network namespaces.
foreach(test IN LISTS integration_tests_TESTS)
  if(test MATCHES "^integration/netns: ")
    set_tests_properties("${test}" PROPERTIES RUN_SERIAL TRUE)
  endif()
endforeach()
