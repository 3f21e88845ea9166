# Read by ctest after the tests doctest_discover_tests found (TEST_INCLUDE_FILES run in order, and
# doctest's include file comes first). The longest integration tests (10-30 s each) start first:
# ctest starts tests of higher COST first, so none of them is left running alone at the end of the
# suite while the other cores idle. Once a run has measured every test, ctest orders by those times.
foreach(test IN LISTS integration_tests_TESTS)
  if(test MATCHES "^integration/nemesis: ")  # a minute and more: first of all
    set_tests_properties("${test}" PROPERTIES COST 90)
  elseif(test MATCHES "^integration/netns: etcd members on hosts")  # 6-9 s, the other netns test 20
    set_tests_properties("${test}" PROPERTIES COST 10)
  elseif(test MATCHES "^integration/(streaming|control plane|replicas|netns|checker proof): ")
    set_tests_properties("${test}" PROPERTIES COST 20)
  elseif(test MATCHES "^integration/(config_server|etcd state store|hostile|prometheus|docs|status_page|addresses|restart): ")
    set_tests_properties("${test}" PROPERTIES COST 10)
  endif()
endforeach()
